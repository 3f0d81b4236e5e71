package issuer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
)

// requireBanned asserts that user's enter is refused as banned until until.
func requireBanned(t *testing.T, is *issuer.Issuer, room, user string, until time.Time) {
	t.Helper()
	_, err := is.Enter(context.Background(), room, user)
	require.ErrorIs(t, err, flashgate.ErrBanned)
	var be *issuer.BannedError
	require.True(t, errors.As(err, &be))
	assert.Equal(t, until.UnixMilli(), be.Until.UnixMilli())
}

func TestBanWaitingUser(t *testing.T) {
	ctx := context.Background()
	is, clk, room, _ := setup(t, issuer.RoomConfig{Capacity: 1})
	alice, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	require.Equal(t, flashgate.StateActive, alice.State)
	bob, _ := is.Enter(ctx, room, "bob")
	carol, _ := is.Enter(ctx, room, "carol")
	require.Equal(t, flashgate.StateWaiting, bob.State)

	now := clk.Now()
	b, err := is.Ban(ctx, room, "bob", time.Hour, "scalper")
	require.NoError(t, err)
	assert.True(t, b.RemovedWaiting)
	assert.Empty(t, b.RevokedAdmission)
	assert.Equal(t, now.Add(time.Hour).UnixMilli(), b.Until.UnixMilli())

	// bob's token reads the final state REVOKED, with the ban's end.
	st, err := is.Status(ctx, room, "bob", bob.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateRevoked, st.State)
	assert.Equal(t, now.UnixMilli(), st.EndedAt.UnixMilli())
	assert.Equal(t, b.Until.UnixMilli(), st.BannedUntil.UnixMilli())
	_, err = is.Exchange(ctx, room, "bob", bob.WaitingToken)
	assert.ErrorIs(t, err, flashgate.ErrRevoked)
	st, _ = is.Status(ctx, room, "carol", carol.WaitingToken)
	assert.EqualValues(t, 1, st.Position, "carol moved up")

	// Refused until the ban ends, by the room's clock; nothing is created meanwhile.
	requireBanned(t, is, room, "bob", b.Until)
	clk.Advance(time.Hour - time.Millisecond)
	requireBanned(t, is, room, "bob", b.Until)
	stats, err := is.Stats(ctx, room)
	require.NoError(t, err)
	assert.EqualValues(t, 3, stats.Entered)
	assert.EqualValues(t, 1, stats.Banned)
	assert.EqualValues(t, 1, stats.Removed)
	assert.EqualValues(t, 1, stats.Waiting)

	// Then allowed, at the back of the line.
	clk.Advance(time.Millisecond)
	again, err := is.Enter(ctx, room, "bob")
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateWaiting, again.State)
	assert.EqualValues(t, 2, again.Position, "behind carol")
	assert.NotEqual(t, bob.WaitingToken, again.WaitingToken)
	st, _ = is.Status(ctx, room, "bob", bob.WaitingToken)
	assert.Equal(t, flashgate.StateRevoked, st.State, "the old entry stays ended")
	assert.True(t, st.BannedUntil.IsZero(), "the ban is over")

	// The tick trims the ended ban.
	_, err = is.Tick(ctx, room)
	require.NoError(t, err)
	p, err := is.Bans(ctx, room, "", 10)
	require.NoError(t, err)
	assert.Zero(t, p.Total)
	assert.Empty(t, p.Bans)
}

func TestBanAdmittedUserRevokes(t *testing.T) {
	ctx := context.Background()
	is, clk, room, _ := setup(t, issuer.RoomConfig{Capacity: 1})
	alice, _ := is.Enter(ctx, room, "alice")
	require.Equal(t, flashgate.StateActive, alice.State)
	adm, err := is.Exchange(ctx, room, "alice", alice.WaitingToken)
	require.NoError(t, err)
	bob, _ := is.Enter(ctx, room, "bob")

	b, err := is.Ban(ctx, room, "alice", 10*time.Minute, "")
	require.NoError(t, err)
	assert.False(t, b.RemovedWaiting)
	assert.Equal(t, adm.ID, b.RevokedAdmission)

	_, err = is.Complete(ctx, room, "alice", adm.ID)
	assert.ErrorIs(t, err, flashgate.ErrRevoked, "completion refused")
	assert.ErrorIs(t, is.CheckActive(ctx, room, adm.ID), flashgate.ErrNotFound)
	st, _ := is.Status(ctx, room, "alice", alice.WaitingToken)
	assert.Equal(t, flashgate.StateRevoked, st.State)
	assert.Equal(t, b.Until.UnixMilli(), st.BannedUntil.UnixMilli())
	requireBanned(t, is, room, "alice", b.Until)

	// The slot is free for the next in line.
	clk.Advance(time.Second)
	res, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Admitted)
	st, _ = is.Status(ctx, room, "bob", bob.WaitingToken)
	assert.Equal(t, flashgate.StateActive, st.State)
	stats, _ := is.Stats(ctx, room)
	assert.EqualValues(t, 1, stats.Revoked)
	assert.EqualValues(t, 0, stats.Removed)

	// Banning ahead: a user who never entered.
	_, err = is.Ban(ctx, room, "zed", time.Minute, "")
	require.NoError(t, err)
	requireBanned(t, is, room, "zed", clk.Now().Add(time.Minute))
}

func TestRevokeBans(t *testing.T) {
	ctx := context.Background()
	is, clk, room, _ := setup(t, issuer.RoomConfig{Capacity: 5, SessionDuration: 2 * time.Minute})
	admit := func(user string) *issuer.Entry {
		e, err := is.Enter(ctx, room, user)
		require.NoError(t, err)
		require.Equal(t, flashgate.StateActive, e.State, user)
		return e
	}

	// By default a revocation by user bans for the room's session duration:
	// no immediate re-entry and admission.
	admit("alice")
	now := clk.Now()
	r, err := is.Revoke(ctx, room, "alice", "")
	require.NoError(t, err)
	assert.Equal(t, now.Add(2*time.Minute).UnixMilli(), r.BannedUntil.UnixMilli())
	requireBanned(t, is, room, "alice", r.BannedUntil)
	clk.Advance(2 * time.Minute)
	e, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateActive, e.State, "the ban over, alice may enter (fast track here)")

	// An explicit ban, with a reason.
	admit("bob")
	ban := 10 * time.Minute
	r, err = is.RevokeWith(ctx, room, "bob", "", issuer.RevokeOptions{Ban: &ban, Reason: "chargeback"})
	require.NoError(t, err)
	requireBanned(t, is, room, "bob", r.BannedUntil)
	p, err := is.Bans(ctx, room, "", 10)
	require.NoError(t, err)
	require.Len(t, p.Bans, 1)
	assert.Equal(t, "bob", p.Bans[0].User)
	assert.Equal(t, "chargeback", p.Bans[0].Reason)
	assert.Equal(t, clk.Now().UnixMilli(), p.Bans[0].BannedAt.UnixMilli())

	// No ban: the user may enter again at once.
	c := admit("carol")
	none := time.Duration(0)
	r, err = is.RevokeWith(ctx, room, "carol", "", issuer.RevokeOptions{Ban: &none})
	require.NoError(t, err)
	assert.True(t, r.BannedUntil.IsZero())
	again, err := is.Enter(ctx, room, "carol")
	require.NoError(t, err)
	assert.NotEqual(t, c.AdmissionID, again.AdmissionID)

	// By admission id alone nobody is banned; an explicit ban needs the user.
	d := admit("dave")
	_, err = is.RevokeWith(ctx, room, "", d.AdmissionID, issuer.RevokeOptions{Ban: &ban})
	assert.ErrorIs(t, err, flashgate.ErrInvalidInput)
	r, err = is.Revoke(ctx, room, "", d.AdmissionID)
	require.NoError(t, err)
	assert.True(t, r.BannedUntil.IsZero())
	_, err = is.Enter(ctx, room, "dave")
	require.NoError(t, err)

	// A repeated revocation returns the first result and bans nobody anew.
	r2, err := is.Revoke(ctx, room, "", d.AdmissionID)
	require.NoError(t, err)
	assert.True(t, r2.Repeated)

	long := issuer.MaxBan + time.Millisecond
	_, err = is.RevokeWith(ctx, room, "erin", "", issuer.RevokeOptions{Ban: &long})
	assert.ErrorIs(t, err, flashgate.ErrInvalidInput)
}

func TestUnban(t *testing.T) {
	ctx := context.Background()
	is, _, room, _ := setup(t, issuer.RoomConfig{Capacity: 1})
	_, err := is.Ban(ctx, room, "alice", time.Hour, "")
	require.NoError(t, err)
	_, err = is.Enter(ctx, room, "alice")
	require.ErrorIs(t, err, flashgate.ErrBanned)
	require.NoError(t, is.Unban(ctx, room, "alice"))
	e, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateActive, e.State)
	assert.ErrorIs(t, is.Unban(ctx, room, "alice"), flashgate.ErrNotFound, "no ban in effect")
	assert.ErrorIs(t, is.Unban(ctx, room, "nobody"), flashgate.ErrNotFound)
	assert.ErrorIs(t, is.Unban(ctx, "no-such-room", "alice"), flashgate.ErrUnknownRoom)
}

func TestBansListAndValidation(t *testing.T) {
	ctx := context.Background()
	is, clk, room, _ := setup(t, issuer.RoomConfig{Capacity: 1})
	// Seven bans; two share an end (the cursor must not lose either).
	ends := map[string]time.Duration{"u1": 5 * time.Minute, "u2": time.Minute, "u3": 3 * time.Minute,
		"u4": 3 * time.Minute, "u5": 4 * time.Minute, "u6": 2 * time.Minute, "gone": time.Second}
	for u, d := range ends {
		_, err := is.Ban(ctx, room, u, d, "r-"+u)
		require.NoError(t, err)
	}
	clk.Advance(time.Second) // "gone" has ended, not yet trimmed
	var got []string
	cursor, pages := "", 0
	for {
		p, err := is.Bans(ctx, room, cursor, 2)
		require.NoError(t, err)
		assert.EqualValues(t, 6, p.Total)
		pages++
		for _, b := range p.Bans {
			got = append(got, b.User)
			assert.Equal(t, "r-"+b.User, b.Reason)
			assert.Equal(t, clk.Now().Add(-time.Second).Add(ends[b.User]).UnixMilli(), b.Until.UnixMilli())
		}
		if p.Next == "" {
			break
		}
		cursor = p.Next
		require.Less(t, pages, 10)
	}
	assert.Equal(t, []string{"u2", "u6", "u3", "u4", "u5", "u1"}, got, "earliest end first; ties by user")

	for _, c := range []struct {
		d      time.Duration
		reason string
	}{{0, ""}, {-time.Second, ""}, {issuer.MaxBan + time.Millisecond, ""}, {time.Minute, strings.Repeat("x", issuer.MaxBanReason+1)}, {time.Minute, "a\nb"}} {
		_, err := is.Ban(ctx, room, "v", c.d, c.reason)
		assert.ErrorIs(t, err, flashgate.ErrInvalidInput, fmt.Sprint(c.d, c.reason))
	}
	_, err := is.Ban(ctx, room, "v", issuer.MaxBan, "")
	assert.NoError(t, err, "30 days is allowed")
	_, err = is.Ban(ctx, room, "", time.Minute, "")
	assert.ErrorIs(t, err, flashgate.ErrInvalidInput)
	_, err = is.Ban(ctx, room, "a:b", time.Minute, "")
	assert.ErrorIs(t, err, flashgate.ErrInvalidInput)
	_, err = is.Ban(ctx, "no-such-room", "v", time.Minute, "")
	assert.ErrorIs(t, err, flashgate.ErrUnknownRoom)
	for _, bad := range []string{"x", "1", ".u", "0.u", "12.a:b"} {
		_, err = is.Bans(ctx, room, bad, 10)
		assert.ErrorIs(t, err, flashgate.ErrInvalidInput, bad)
	}
	_, err = is.Bans(ctx, room, "", 0)
	assert.ErrorIs(t, err, flashgate.ErrInvalidInput)
	_, err = is.Bans(ctx, room, "", issuer.MaxBansPage+1)
	assert.ErrorIs(t, err, flashgate.ErrInvalidInput)
}

// A waiting user far behind the head is answered from the replica's
// snapshot; once banned, their status reads REVOKED within a snapshot's age.
func TestBanFarBehindTheHead(t *testing.T) {
	ctx := context.Background()
	_, clk, room, rdb := setup(t, issuer.RoomConfig{Capacity: 1, State: issuer.RoomPaused})
	is := newIssuer(t, rdb, clk, func(c *issuer.Config) { c.StatusSnapshot = issuer.SuggestedStatusSnapshot })
	var last *issuer.Entry
	for i := range 200 {
		e, err := is.Enter(ctx, room, fmt.Sprintf("u%03d", i))
		require.NoError(t, err)
		if i == 150 {
			last = e
		}
	}
	st, err := is.Status(ctx, room, "u150", last.WaitingToken)
	require.NoError(t, err)
	require.True(t, st.PositionEstimated, "answered from the snapshot")
	_, err = is.Ban(ctx, room, "u150", time.Hour, "")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := is.Status(ctx, room, "u150", last.WaitingToken)
		return err == nil && st.State == flashgate.StateRevoked
	}, 3*time.Second, 50*time.Millisecond)
}
