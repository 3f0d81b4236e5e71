package issuer_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
)

// unclaimedKey is the room's unclaimed ZSET (lua/prelude.lua KEYS[13]).
func unclaimedKey(room string) string { return issuer.RoomKeys(room)[12] }

// TestArrivalWindowUnclaimedExpires: an admission not claimed (exchanged)
// within the arrival window ends early — EXPIRED, reason not_claimed — and
// its slot goes to the next in line at the next tick; exchange is refused
// from the window's end on, before the tick and after it.
func TestArrivalWindowUnclaimedExpires(t *testing.T) {
	ctx := context.Background()
	is, clk, room, rdb := setup(t, issuer.RoomConfig{Capacity: 1, SessionDuration: 5 * time.Minute})
	got, err := is.Room(ctx, room)
	require.NoError(t, err)
	require.Equal(t, issuer.DefaultArrivalWindow, got.ArrivalWindow, "default: 60 s")

	a := admittedEntry(t, is, room, "alice")
	assert.Equal(t, clk.Now().Add(5*time.Minute), a.ExpiresAt, "the admission's expiry is the session's")
	b, err := is.Enter(ctx, room, "bob")
	require.NoError(t, err)
	require.Equal(t, flashgate.StateWaiting, b.State)
	n, _ := rdb.ZCard(ctx, unclaimedKey(room)).Result()
	assert.EqualValues(t, 1, n, "the admitted user is unclaimed; the waiting one costs nothing there")

	clk.Advance(time.Minute - time.Millisecond)
	res, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 0, res.Expired+res.Admitted, "1 ms before the window ends nothing happens")
	st, _ := is.Status(ctx, room, "alice", a.WaitingToken)
	assert.Equal(t, flashgate.StateActive, st.State)
	assert.Empty(t, st.Reason)

	clk.Advance(time.Millisecond)
	st, _ = is.Status(ctx, room, "alice", a.WaitingToken)
	assert.Equal(t, flashgate.StateExpired, st.State, "window end == now is lapsed, before any tick")
	assert.Equal(t, issuer.ReasonNotClaimed, st.Reason)
	_, err = is.Exchange(ctx, room, "alice", a.WaitingToken)
	assert.ErrorIs(t, err, flashgate.ErrExpired, "exchange after the window is refused")
	assert.ErrorIs(t, is.CheckActive(ctx, room, a.AdmissionID), flashgate.ErrExpired)

	res, err = is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, issuer.TickResult{Admitted: 1, Expired: 1, NotClaimed: 1, Active: 1, Waiting: 0, Tick: time.Second}, res,
		"the slot goes to the next in line at the next tick")
	st, _ = is.Status(ctx, room, "bob", b.WaitingToken)
	assert.Equal(t, flashgate.StateActive, st.State)
	st, _ = is.Status(ctx, room, "alice", a.WaitingToken)
	assert.Equal(t, flashgate.StateExpired, st.State, "still EXPIRED after the tick dropped it")
	assert.Equal(t, issuer.ReasonNotClaimed, st.Reason)
	assert.Equal(t, clk.Now(), st.EndedAt)
	_, err = is.Exchange(ctx, room, "alice", a.WaitingToken)
	assert.ErrorIs(t, err, flashgate.ErrExpired)
	_, err = is.Complete(ctx, room, "alice", a.AdmissionID)
	assert.ErrorIs(t, err, flashgate.ErrExpired)

	stats, err := is.Stats(ctx, room)
	require.NoError(t, err)
	assert.EqualValues(t, 1, stats.Expired)
	assert.EqualValues(t, 1, stats.NotClaimed)
	assert.EqualValues(t, 1, stats.PeakActive, "capacity held throughout")

	// alice may line up again, behind bob's admission.
	again, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateWaiting, again.State)
}

// TestArrivalWindowClaimLastsTheSession: an exchange within the window
// claims the admission, which then lasts its session (exp = admitted at +
// session, never extended); a repeated exchange, even after the window, gives
// the same token; it ends EXPIRED with reason session_ended.
func TestArrivalWindowClaimLastsTheSession(t *testing.T) {
	ctx := context.Background()
	is, clk, room, rdb := setup(t, issuer.RoomConfig{Capacity: 1, SessionDuration: 5 * time.Minute, ArrivalWindow: 20 * time.Second})
	a := admittedEntry(t, is, room, "alice")
	b, _ := is.Enter(ctx, room, "bob")

	clk.Advance(19 * time.Second)
	adm, err := is.Exchange(ctx, room, "alice", a.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, a.ExpiresAt.Unix(), adm.ExpiresAt.Unix(), "exp = admitted at + session, not claim + session")
	assert.Equal(t, a.AdmittedAt.Unix(), adm.IssuedAt.Unix())
	n, _ := rdb.ZCard(ctx, unclaimedKey(room)).Result()
	assert.EqualValues(t, 0, n, "claimed: the marker is gone")

	// A session change mid-sale changes neither the admission nor its claim.
	_, _, err = is.UpdateRoom(ctx, room, issuer.RoomPatch{SessionDuration: ptr(10 * time.Second)})
	require.NoError(t, err)

	clk.Advance(2 * time.Minute)
	res, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Zero(t, res.Expired, "a claimed admission outlives the window")
	assert.Zero(t, res.Admitted)
	st, _ := is.Status(ctx, room, "alice", a.WaitingToken)
	assert.Equal(t, flashgate.StateActive, st.State)
	again, err := is.Exchange(ctx, room, "alice", a.WaitingToken)
	require.NoError(t, err, "re-exchange after the window")
	assert.Equal(t, adm.Token, again.Token, "re-exchange is idempotent")

	clk.Set(a.ExpiresAt)
	st, _ = is.Status(ctx, room, "alice", a.WaitingToken)
	assert.Equal(t, flashgate.StateExpired, st.State)
	assert.Equal(t, issuer.ReasonSessionEnded, st.Reason)
	res, err = is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Expired)
	assert.Equal(t, 0, res.NotClaimed)
	assert.Equal(t, 1, res.Admitted)
	st, _ = is.Status(ctx, room, "alice", a.WaitingToken)
	assert.Equal(t, issuer.ReasonSessionEnded, st.Reason, "after the tick too")
	st, _ = is.Status(ctx, room, "bob", b.WaitingToken)
	assert.Equal(t, flashgate.StateActive, st.State)
}

// TestArrivalWindowEndsCleanly: a claimed admission completes after the
// window; leave, revoke and ban of unclaimed admissions drop the marker; an
// enter after the window of an unclaimed admission queues the user again.
func TestArrivalWindowEndsCleanly(t *testing.T) {
	ctx := context.Background()
	is, clk, room, rdb := setup(t, issuer.RoomConfig{Capacity: 10, SessionDuration: time.Minute, ArrivalWindow: 5 * time.Second})
	a := admittedEntry(t, is, room, "alice")
	_, err := is.Exchange(ctx, room, "alice", a.WaitingToken)
	require.NoError(t, err)
	clk.Advance(10 * time.Second)
	_, err = is.Complete(ctx, room, "alice", a.AdmissionID)
	require.NoError(t, err, "a claimed admission completes after the window")

	b := admittedEntry(t, is, room, "bob")
	c := admittedEntry(t, is, room, "carol")
	admittedEntry(t, is, room, "erin")
	require.NoError(t, is.Leave(ctx, room, "bob", b.WaitingToken))
	_, err = is.Revoke(ctx, room, "carol", "")
	require.NoError(t, err)
	_, err = is.Ban(ctx, room, "erin", time.Minute, "test")
	require.NoError(t, err)
	n, _ := rdb.ZCard(ctx, unclaimedKey(room)).Result()
	assert.EqualValues(t, 0, n, "ended admissions leave nothing in the unclaimed set")
	st, _ := is.Status(ctx, room, "carol", c.WaitingToken)
	assert.Equal(t, flashgate.StateRevoked, st.State)

	// An enter after the window of an unclaimed admission queues the user again.
	d := admittedEntry(t, is, room, "dave")
	clk.Advance(5 * time.Second)
	again, err := is.Enter(ctx, room, "dave")
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateActive, again.State, "fast track again, as a new admission")
	assert.NotEqual(t, d.AdmissionID, again.AdmissionID)
	st, _ = is.Status(ctx, room, "dave", d.WaitingToken)
	assert.Equal(t, flashgate.StateExpired, st.State)
	assert.Equal(t, issuer.ReasonNotClaimed, st.Reason)
}

// TestArrivalWindowOff: ArrivalWindowOff (0 in a patch and the admin API)
// is the behaviour before the window: an unclaimed admission lasts its
// session, and nothing is stored per admission.
func TestArrivalWindowOff(t *testing.T) {
	ctx := context.Background()
	is, clk, room, rdb := setup(t, issuer.RoomConfig{Capacity: 1, SessionDuration: 5 * time.Minute, ArrivalWindow: issuer.ArrivalWindowOff})
	a := admittedEntry(t, is, room, "alice")
	b, _ := is.Enter(ctx, room, "bob")
	n, _ := rdb.ZCard(ctx, unclaimedKey(room)).Result()
	assert.EqualValues(t, 0, n)

	clk.Advance(5*time.Minute - time.Millisecond)
	res, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Zero(t, res.Expired)
	st, _ := is.Status(ctx, room, "alice", a.WaitingToken)
	assert.Equal(t, flashgate.StateActive, st.State)
	clk.Advance(time.Millisecond)
	res, err = is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, issuer.TickResult{Admitted: 1, Expired: 1, Active: 1, Tick: time.Second}, res)
	st, _ = is.Status(ctx, room, "alice", a.WaitingToken)
	assert.Equal(t, flashgate.StateExpired, st.State)
	assert.Equal(t, issuer.ReasonSessionEnded, st.Reason)
	st, _ = is.Status(ctx, room, "bob", b.WaitingToken)
	assert.Equal(t, flashgate.StateActive, st.State)
}

// TestArrivalWindowConfig: the setting's defaults, bounds and round trip
// through SetRoom, UpdateRoom, Room and Stats.
func TestArrivalWindowConfig(t *testing.T) {
	ctx := context.Background()
	is, _, room, _ := setup(t, issuer.RoomConfig{ArrivalWindow: 1500 * time.Millisecond})
	got, err := is.Room(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 1500*time.Millisecond, got.ArrivalWindow)

	cfg, _, err := is.UpdateRoom(ctx, room, issuer.RoomPatch{ArrivalWindow: ptr(time.Duration(0))})
	require.NoError(t, err)
	assert.Equal(t, issuer.ArrivalWindowOff, cfg.ArrivalWindow, "0 in a patch turns it off")
	got, _ = is.Room(ctx, room)
	assert.Equal(t, issuer.ArrivalWindowOff, got.ArrivalWindow)
	cfg, _, err = is.UpdateRoom(ctx, room, issuer.RoomPatch{Capacity: ptr(3)})
	require.NoError(t, err)
	assert.Equal(t, issuer.ArrivalWindowOff, cfg.ArrivalWindow, "kept by a patch without it")
	_, _, err = is.UpdateRoom(ctx, room, issuer.RoomPatch{ArrivalWindow: ptr(90 * time.Second)})
	require.NoError(t, err)
	st, err := is.Stats(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 90*time.Second, st.Config.ArrivalWindow)

	for _, bad := range []time.Duration{-time.Second, 999 * time.Millisecond, 16 * time.Minute} {
		_, _, err := is.UpdateRoom(ctx, room, issuer.RoomPatch{ArrivalWindow: ptr(bad)})
		assert.ErrorIs(t, err, flashgate.ErrInvalidInput, "%s", bad)
	}
	assert.ErrorIs(t, issuer.RoomConfig{ArrivalWindow: 500 * time.Millisecond}.WithDefaults().Validate(), flashgate.ErrInvalidInput)
	assert.NoError(t, issuer.RoomConfig{ArrivalWindow: issuer.ArrivalWindowOff}.WithDefaults().Validate())
}

func ptr[T any](v T) *T { return &v }
