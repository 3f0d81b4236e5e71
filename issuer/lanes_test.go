package issuer_test

import (
	"context"
	"encoding/base64"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/internal/testing/testkit"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/verifier"
)

// laneSetup is setup with a keys.Ring as the Signer (it signs invites too).
func laneSetup(t *testing.T, c issuer.RoomConfig) (*issuer.Issuer, *testkit.Clock, string, *redis.Client, *keys.Ring) {
	t.Helper()
	rdb := redistest.Start(t).Client(t)
	clk := newClock()
	ring, err := keys.Generate(clk.Now())
	require.NoError(t, err)
	is := newIssuer(t, rdb, clk, func(c *issuer.Config) { c.Signer = ring })
	room := redistest.Room("lanes")
	_, err = is.SetRoom(context.Background(), room, c)
	require.NoError(t, err)
	return is, clk, room, rdb, ring
}

func invite(t *testing.T, is *issuer.Issuer, room string, o issuer.InviteOptions) string {
	t.Helper()
	inv, err := is.Invites(room, o)
	require.NoError(t, err)
	require.Len(t, inv, 1)
	return inv[0].Token
}

func enterInvite(t *testing.T, is *issuer.Issuer, room, user, tok string) *issuer.Entry {
	t.Helper()
	e, err := is.EnterWithInvite(context.Background(), room, user, tok)
	require.NoError(t, err, user)
	return e
}

// TestPriorityLaneBeforePublic: the priority lane is admitted before the
// public line, within the same capacity; positions count the lane ahead of
// the public line; total_waiting counts both; nobody is fast-tracked while
// the lane is non-empty.
func TestPriorityLaneBeforePublic(t *testing.T) {
	ctx := context.Background()
	is, _, room, _, _ := laneSetup(t, issuer.RoomConfig{Capacity: 3, RatePerMinute: 600, State: issuer.RoomPaused})
	pub := map[string]*issuer.Entry{}
	for _, u := range []string{"p1", "p2"} {
		e, err := is.Enter(ctx, room, u)
		require.NoError(t, err)
		pub[u] = e
		assert.Equal(t, flashgate.LanePublic, e.Lane)
	}
	v1 := enterInvite(t, is, room, "v1", invite(t, is, room, issuer.InviteOptions{}))
	assert.Equal(t, flashgate.StateWaiting, v1.State)
	assert.Equal(t, flashgate.LanePriority, v1.Lane)
	assert.EqualValues(t, 1, v1.Position, "ahead of the whole public line")
	assert.EqualValues(t, 3, v1.TotalWaiting)
	p3, err := is.Enter(ctx, room, "p3")
	require.NoError(t, err)
	assert.EqualValues(t, 4, p3.Position, "the lane (1) and the public line (2) ahead")
	v2 := enterInvite(t, is, room, "v2", invite(t, is, room, issuer.InviteOptions{Lane: flashgate.LanePriority}))
	assert.EqualValues(t, 2, v2.Position, "FIFO within the lane: behind v1")

	st, err := is.Status(ctx, room, "p1", pub["p1"].WaitingToken)
	require.NoError(t, err)
	assert.EqualValues(t, 3, st.Position, "two in the lane ahead")
	assert.EqualValues(t, 5, st.TotalWaiting)
	assert.Equal(t, flashgate.LanePublic, st.Lane)
	st, err = is.Status(ctx, room, "v2", v2.WaitingToken)
	require.NoError(t, err)
	assert.EqualValues(t, 2, st.Position)
	assert.Equal(t, flashgate.LanePriority, st.Lane)
	again, err := is.Enter(ctx, room, "v2")
	require.NoError(t, err)
	assert.Equal(t, v2.WaitingToken, again.WaitingToken, "a plain enter answers the lane entry: one entry per user")
	assert.Equal(t, flashgate.LanePriority, again.Lane)

	_, err = is.SetState(ctx, room, issuer.RoomOpen)
	require.NoError(t, err)
	res, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 3, res.Admitted)
	assert.Equal(t, 2, res.Waiting, "both lanes")
	for u, tok := range map[string]string{"v1": v1.WaitingToken, "v2": v2.WaitingToken, "p1": pub["p1"].WaitingToken} {
		st, err := is.Status(ctx, room, u, tok)
		require.NoError(t, err)
		assert.Equal(t, flashgate.StateActive, st.State, u)
		assert.Empty(t, st.Lane, "lane is a WAITING entry's")
	}
	st, err = is.Status(ctx, room, "p2", pub["p2"].WaitingToken)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Position)
	stats, err := is.Stats(ctx, room)
	require.NoError(t, err)
	assert.EqualValues(t, 2, stats.PriorityAdmitted)
	assert.EqualValues(t, 3, stats.Admitted)
	assert.EqualValues(t, 2, stats.InvitesUsed)
	assert.EqualValues(t, 2, stats.Waiting)
	assert.EqualValues(t, 0, stats.Priority)
}

// TestPriorityLaneSharesTheRate: one rate budget for both lanes — a tick
// admits at most what the rate allows, the lane first.
func TestPriorityLaneSharesTheRate(t *testing.T) {
	ctx := context.Background()
	// 60/min with 1 s ticks: the bucket holds 2 (two ticks' worth).
	is, clk, room, _, _ := laneSetup(t, issuer.RoomConfig{Capacity: 100, RatePerMinute: 60, State: issuer.RoomPaused})
	for i := range 3 {
		_, err := is.Enter(ctx, room, "p"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	for i := range 3 {
		enterInvite(t, is, room, "v"+strconv.Itoa(i), invite(t, is, room, issuer.InviteOptions{}))
	}
	_, err := is.SetState(ctx, room, issuer.RoomOpen)
	require.NoError(t, err)
	res, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Admitted, "the bucket's burst")
	st, err := is.Stats(ctx, room)
	require.NoError(t, err)
	assert.EqualValues(t, 2, st.PriorityAdmitted)
	assert.EqualValues(t, 1, st.Priority)
	clk.Advance(2 * time.Second)
	res, err = is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Admitted)
	st, err = is.Stats(ctx, room)
	require.NoError(t, err)
	assert.EqualValues(t, 3, st.PriorityAdmitted, "the lane's last, then the public head")
	assert.EqualValues(t, 4, st.Admitted)
}

// TestLanesFIFO: admissions follow arrival order within each lane, and every
// priority entry waiting when a public one is admitted is admitted first.
func TestLanesFIFO(t *testing.T) {
	ctx := context.Background()
	is, clk, room, rdb, _ := laneSetup(t, issuer.RoomConfig{Capacity: 1000, RatePerMinute: 600, TickBatch: 3, State: issuer.RoomPaused})
	lane := map[string]string{}
	for i := range 40 {
		u := "u" + strconv.Itoa(i)
		if i%3 == 1 {
			enterInvite(t, is, room, u, invite(t, is, room, issuer.InviteOptions{User: u}))
			lane[u] = flashgate.LanePriority
		} else {
			_, err := is.Enter(ctx, room, u)
			require.NoError(t, err)
			lane[u] = flashgate.LanePublic
		}
	}
	n, _ := rdb.ZCard(ctx, issuer.RoomKeys(room)[15]).Result()
	assert.EqualValues(t, 13, n, "one laneseqs member per lane entry")
	_, err := is.SetState(ctx, room, issuer.RoomOpen)
	require.NoError(t, err)
	for range 20 {
		_, err := is.Tick(ctx, room)
		require.NoError(t, err)
		clk.Advance(time.Second)
	}
	m, err := rdb.HGetAll(ctx, issuer.RoomKeys(room)[3]).Result()
	require.NoError(t, err)
	require.Len(t, m, 40)
	n, _ = rdb.ZCard(ctx, issuer.RoomKeys(room)[15]).Result()
	assert.Zero(t, n, "the public line passed every lane entry: laneseqs trimmed")
	type adm struct {
		seq, no int64
		lane    string
	}
	var all []adm
	for u, jti := range m {
		id, ok := flashgate.ParseAdmissionID(jti)
		require.True(t, ok)
		all = append(all, adm{id.Arrival, id.Number, lane[u]})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].no < all[j].no })
	for i, a := range all {
		want := flashgate.LanePublic
		if i < 13 {
			want = flashgate.LanePriority
		}
		assert.Equal(t, want, a.lane, "admission %d: the whole lane first", a.no)
		for _, b := range all[:i] {
			if b.lane == a.lane {
				assert.Less(t, b.seq, a.seq, "FIFO within the %s lane", a.lane)
			}
		}
	}
}

// TestBypass: a bypass invite admits at once when capacity and rate allow,
// even with others waiting in either lane; when they do not, the user waits
// at the tail of the priority lane — never beyond capacity or rate.
func TestBypass(t *testing.T) {
	ctx := context.Background()
	is, _, room, _, _ := laneSetup(t, issuer.RoomConfig{Capacity: 1, RatePerMinute: 600})
	a := admittedEntry(t, is, room, "alice")
	bob, err := is.Enter(ctx, room, "bob")
	require.NoError(t, err)
	require.Equal(t, flashgate.StateWaiting, bob.State)

	by := issuer.InviteOptions{Lane: flashgate.LaneBypass}
	carol := enterInvite(t, is, room, "carol", invite(t, is, room, by))
	assert.Equal(t, flashgate.StateWaiting, carol.State, "capacity full: no bypass")
	assert.Equal(t, flashgate.LanePriority, carol.Lane)
	assert.EqualValues(t, 1, carol.Position, "at the head of the lane, ahead of bob")

	_, err = is.Complete(ctx, room, "alice", a.AdmissionID)
	require.NoError(t, err)
	dave := enterInvite(t, is, room, "dave", invite(t, is, room, by))
	assert.Equal(t, flashgate.StateActive, dave.State, "capacity free: straight in, around both lanes")
	assert.NotEmpty(t, dave.AdmissionID)
	st, err := is.Stats(ctx, room)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Bypassed)
	assert.EqualValues(t, 1, st.Active)
	erin := enterInvite(t, is, room, "erin", invite(t, is, room, by))
	assert.Equal(t, flashgate.StateWaiting, erin.State, "capacity full again")
	assert.EqualValues(t, 2, erin.Position)

	// The rate: 1/min, a fresh room with capacity to spare.
	is2, clk2, room2, _, _ := laneSetup(t, issuer.RoomConfig{Capacity: 100, RatePerMinute: 1})
	admittedEntry(t, is2, room2, "first")
	f := enterInvite(t, is2, room2, "fast", invite(t, is2, room2, by))
	assert.Equal(t, flashgate.StateWaiting, f.State, "the rate is spent: no bypass")
	clk2.Advance(time.Minute)
	g := enterInvite(t, is2, room2, "later", invite(t, is2, room2, by))
	assert.Equal(t, flashgate.StateActive, g.State, "a minute later the rate allows one")
}

// TestInviteMovesAPublicEntry: a public user who enters with an invite
// leaves the public line for the tail of the lane with a new arrival number
// and token (the old token reads NOT_FOUND); a repeated enter with the same
// invite answers the same entry and uses nothing more.
func TestInviteMovesAPublicEntry(t *testing.T) {
	ctx := context.Background()
	is, _, room, _, _ := laneSetup(t, issuer.RoomConfig{Capacity: 1, State: issuer.RoomPaused})
	for _, u := range []string{"a", "b", "c"} {
		_, err := is.Enter(ctx, room, u)
		require.NoError(t, err)
	}
	c, err := is.Enter(ctx, room, "c")
	require.NoError(t, err)
	require.EqualValues(t, 3, c.Position)
	tok := invite(t, is, room, issuer.InviteOptions{User: "c"})
	moved := enterInvite(t, is, room, "c", tok)
	assert.EqualValues(t, 1, moved.Position)
	assert.EqualValues(t, 3, moved.TotalWaiting, "moved, not copied")
	assert.Equal(t, flashgate.LanePriority, moved.Lane)
	assert.Greater(t, moved.Arrival, c.Arrival, "a new arrival number: the lane's tail")
	old, err := is.Status(ctx, room, "c", c.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateNotFound, old.State, "the public entry is superseded")
	again := enterInvite(t, is, room, "c", tok)
	assert.Equal(t, moved.WaitingToken, again.WaitingToken, "idempotent")
	st, err := is.Stats(ctx, room)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.InvitesUsed)
	assert.EqualValues(t, 3, st.Waiting)
	assert.EqualValues(t, 1, st.Priority)
	assert.EqualValues(t, 4, st.Entered, "the lane entry is a new entry")

	// Leave and ban know the lane.
	require.NoError(t, is.Leave(ctx, room, "c", moved.WaitingToken))
	st, _ = is.Stats(ctx, room)
	assert.EqualValues(t, 0, st.Priority)
	v := enterInvite(t, is, room, "v", invite(t, is, room, issuer.InviteOptions{}))
	_, err = is.Ban(ctx, room, "v", time.Hour, "")
	require.NoError(t, err)
	got, err := is.Status(ctx, room, "v", v.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateRevoked, got.State)
	_, err = is.EnterWithInvite(ctx, room, "v", invite(t, is, room, issuer.InviteOptions{}))
	assert.ErrorIs(t, err, flashgate.ErrBanned, "an invite does not lift a ban")
}

// TestInviteSingleUseByDefault: an invite signed with no options is single
// use (a leaked link moves one holder, not a crowd, issue 23 §4): its claims
// say once, and a second holder is refused invite_used; Reusable says
// otherwise.
func TestInviteSingleUseByDefault(t *testing.T) {
	ctx := context.Background()
	is, _, room, _, _ := laneSetup(t, issuer.RoomConfig{Capacity: 1, State: issuer.RoomPaused})
	inv, err := is.Invites(room, issuer.InviteOptions{})
	require.NoError(t, err)
	require.Len(t, inv, 1)
	assert.True(t, inv[0].SingleUse)
	enterInvite(t, is, room, "first", inv[0].Token)
	_, err = is.EnterWithInvite(ctx, room, "second", inv[0].Token)
	assert.ErrorIs(t, err, flashgate.ErrInviteUsed)

	re, err := is.Invites(room, issuer.InviteOptions{Reusable: true})
	require.NoError(t, err)
	assert.False(t, re[0].SingleUse)
	enterInvite(t, is, room, "r1", re[0].Token)
	enterInvite(t, is, room, "r2", re[0].Token)
}

// TestInviteSingleUseConcurrent: many users race with one single-use
// invite: exactly one gets a place, every other is refused invite_used.
func TestInviteSingleUseConcurrent(t *testing.T) {
	ctx := context.Background()
	is, clk, room, rdb, ring := laneSetup(t, issuer.RoomConfig{Capacity: 1, State: issuer.RoomPaused})
	other := newIssuer(t, rdb, clk, func(c *issuer.Config) { c.Signer = ring })
	tok := invite(t, is, room, issuer.InviteOptions{})
	var ok, used atomic.Int64
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := []*issuer.Issuer{is, other}[i%2]
			_, err := r.EnterWithInvite(ctx, room, "u"+strconv.Itoa(i), tok)
			switch {
			case err == nil:
				ok.Add(1)
			case assert.ErrorIs(t, err, flashgate.ErrInviteUsed):
				used.Add(1)
			}
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 1, ok.Load())
	assert.EqualValues(t, 39, used.Load())
	st, err := is.Stats(ctx, room)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.InvitesUsed)
	assert.EqualValues(t, 1, st.Priority)

	// A reusable invite takes a place for each holder.
	multi := invite(t, is, room, issuer.InviteOptions{Reusable: true})
	for i := range 3 {
		enterInvite(t, is, room, "m"+strconv.Itoa(i), multi)
	}
	st, _ = is.Stats(ctx, room)
	assert.EqualValues(t, 4, st.Priority)

	// The used id is kept until the invite's expiry, then trimmed by the tick.
	n, _ := rdb.ZCard(ctx, issuer.RoomKeys(room)[14]).Result()
	assert.EqualValues(t, 1, n)
	clk.Advance(issuer.DefaultInviteTTL)
	_, err = is.Tick(ctx, room)
	require.NoError(t, err)
	n, _ = rdb.ZCard(ctx, issuer.RoomKeys(room)[14]).Result()
	assert.Zero(t, n, "trimmed at its expiry")
}

// TestInviteRefusals: each way an invite can be wrong, with its code; an
// admission token or a waiting token is no invite, and an invite is no
// admission token.
func TestInviteRefusals(t *testing.T) {
	ctx := context.Background()
	is, clk, room, rdb, ring := laneSetup(t, issuer.RoomConfig{Capacity: 1})
	tok := invite(t, is, room, issuer.InviteOptions{TTL: time.Hour, User: "alice"})
	try := func(user, tok string) error {
		_, err := is.EnterWithInvite(ctx, room, user, tok)
		return err
	}

	assert.ErrorIs(t, try("bob", tok), flashgate.ErrInviteScope, "bound to alice")
	otherRoom := invite(t, is, room+"x", issuer.InviteOptions{})
	assert.ErrorIs(t, try("alice", otherRoom), flashgate.ErrInviteScope, "another room")

	parts := strings.Split(tok, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(payload), `"alice"`, `"mallo"`, 1))) + "." + parts[2]
	assert.ErrorIs(t, try("mallo", tampered), flashgate.ErrInviteInvalid, "tampered")
	assert.ErrorIs(t, try("alice", "garbage"), flashgate.ErrInviteInvalid)
	assert.ErrorIs(t, try("alice", ""), flashgate.ErrInviteInvalid)

	stranger, err := keys.Generate(clk.Now())
	require.NoError(t, err)
	foreign, err := issuer.NewInvites(stranger, "https://issuer.test", room, issuer.InviteOptions{}, clk.Now())
	require.NoError(t, err)
	assert.ErrorIs(t, try("alice", foreign[0].Token), flashgate.ErrInviteInvalid, "signed by another ring")
	otherIss, err := issuer.NewInvites(ring, "someone-else", room, issuer.InviteOptions{}, clk.Now())
	require.NoError(t, err)
	assert.ErrorIs(t, try("alice", otherIss[0].Token), flashgate.ErrInviteInvalid, "another issuer")

	// An admission token (same keys, typ flashgate-admission+jwt) is no invite; nor is a waiting token.
	a := admittedEntry(t, is, room, "carol")
	adm, err := is.Exchange(ctx, room, "carol", a.WaitingToken)
	require.NoError(t, err)
	err = try("carol", adm.Token)
	assert.ErrorIs(t, err, flashgate.ErrInviteInvalid)
	assert.Contains(t, err.Error(), "admission token")
	assert.ErrorIs(t, try("carol", a.WaitingToken), flashgate.ErrInviteInvalid)

	// An invite is no admission token: the verifier refuses it by its type.
	v, err := verifier.New(ring, verifier.Config{Issuer: "https://issuer.test", Audience: "orders"})
	require.NoError(t, err)
	_, err = v.Verify(ctx, tok, verifier.Expect{Product: room, User: "alice"})
	require.Error(t, err)
	assert.Equal(t, "bad_type", verifier.CodeOf(err).String())

	// Expired, by the room's clock.
	clk.Advance(time.Hour)
	assert.ErrorIs(t, try("alice", tok), flashgate.ErrInviteExpired)
	st, err := is.Stats(ctx, room)
	require.NoError(t, err)
	assert.Zero(t, st.InvitesUsed, "no refusal used anything")
	n, _ := rdb.ZCard(ctx, issuer.RoomKeys(room)[13]).Result()
	assert.Zero(t, n)

	// Issuing: bounds.
	for _, o := range []issuer.InviteOptions{{Lane: "vip"}, {User: "bad user"}, {TTL: -time.Second},
		{TTL: issuer.MaxInviteTTL + time.Hour}, {Count: issuer.MaxInvites + 1}} {
		_, err := is.Invites(room, o)
		assert.ErrorIs(t, err, flashgate.ErrInvalidInput, "%+v", o)
	}
	many, err := is.Invites(room, issuer.InviteOptions{Count: 5})
	require.NoError(t, err)
	ids := map[string]bool{}
	for _, inv := range many {
		ids[inv.ID] = true
	}
	assert.Len(t, ids, 5, "each invite its own id")
}

// TestLanesSnapshot: a public entry's position interpolated from the
// snapshot counts the priority lane ahead; an entry that came through a
// lane (waiting in it, admitted from it, or admitted at once by a bypass
// invite) is answered exactly, wherever its arrival number falls in the
// public line — else an admitted lane user would read an interpolated
// WAITING place until the public line reached it.
func TestLanesSnapshot(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	room := redistest.Room("snaplanes")
	cfg := issuer.Config{Redis: rdb, WaitingSecret: secret, Signer: ring, StatusSnapshot: 2 * time.Second}
	cached, err := issuer.New(cfg)
	require.NoError(t, err)
	_, err = cached.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1, RatePerMinute: 60, State: issuer.RoomPaused})
	require.NoError(t, err)
	toks := map[int]string{}
	var vip *issuer.Entry
	for i := 1; i <= 300; i++ {
		if i == 150 { // in the middle of the public line's arrival numbers
			inv, err := cached.Invites(room, issuer.InviteOptions{})
			require.NoError(t, err)
			vip, err = cached.EnterWithInvite(ctx, room, "vip", inv[0].Token)
			require.NoError(t, err)
		}
		e, err := cached.Enter(ctx, room, "u"+strconv.Itoa(i))
		require.NoError(t, err)
		toks[i] = e.WaitingToken
	}
	for i := 100; i <= 300; i += 50 {
		e, err := cached.Status(ctx, room, "u"+strconv.Itoa(i), toks[i])
		require.NoError(t, err)
		assert.True(t, e.PositionEstimated)
		assert.InDelta(t, i+1, e.Position, 1, "u%d: the lane's one ahead (±1: the lane entry's gap)", i)
		assert.EqualValues(t, 301, e.TotalWaiting)
		assert.Equal(t, flashgate.LanePublic, e.Lane)
	}
	e, err := cached.Status(ctx, room, "vip", vip.WaitingToken)
	require.NoError(t, err)
	assert.False(t, e.PositionEstimated, "a lane user is answered exactly")
	assert.EqualValues(t, 1, e.Position)
	assert.Equal(t, flashgate.LanePriority, e.Lane)

	// Admitted from the lane: a fresh replica's snapshot (the lane empty now)
	// must not interpolate the vip's arrival number as a public place.
	_, err = cached.SetState(ctx, room, issuer.RoomOpen)
	require.NoError(t, err)
	res, err := cached.Tick(ctx, room)
	require.NoError(t, err)
	require.Equal(t, 1, res.PriorityAdmitted)
	fresh, err := issuer.New(cfg)
	require.NoError(t, err)
	e, err = fresh.Status(ctx, room, "vip", vip.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateActive, e.State, "admitted from the lane: exact, not an estimated WAITING")
	e, err = fresh.Status(ctx, room, "u200", toks[200])
	require.NoError(t, err)
	assert.True(t, e.PositionEstimated, "the public line is still interpolated")

	// Admitted at once by a bypass invite, its arrival number then passed by later public arrivals.
	_, _, err = cached.UpdateRoom(ctx, room, issuer.RoomPatch{Capacity: ptr(2)})
	require.NoError(t, err)
	inv, err := cached.Invites(room, issuer.InviteOptions{Lane: flashgate.LaneBypass})
	require.NoError(t, err)
	by, err := cached.EnterWithInvite(ctx, room, "by", inv[0].Token)
	require.NoError(t, err)
	require.Equal(t, flashgate.StateActive, by.State)
	for i := 301; i <= 400; i++ {
		_, err := cached.Enter(ctx, room, "u"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	again, err := issuer.New(cfg)
	require.NoError(t, err)
	e, err = again.Status(ctx, room, "by", by.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateActive, e.State, "admitted by bypass: exact")
}

// TestLanesInvariantsUnderConcurrency: two replicas, public enters, priority
// and bypass invites (some single use, raced by two holders) all at once,
// while both replicas tick and a consumer completes admissions: every user
// is admitted once, live never exceeds capacity, no 60 s window exceeds the
// rate, and admissions follow arrival order within each lane.
func TestLanesInvariantsUnderConcurrency(t *testing.T) {
	const (
		capacity = 20
		rate     = 1200
		public   = 600
		vips     = 150
	)
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	clk := newClock()
	ring, err := keys.Generate(clk.Now())
	require.NoError(t, err)
	room := redistest.Room("lanesurge")
	reps := []*issuer.Issuer{
		newIssuer(t, rdb, clk, func(c *issuer.Config) { c.Signer = ring }),
		newIssuer(t, rdb, clk, func(c *issuer.Config) { c.Signer = ring }),
	}
	_, err = reps[0].SetRoom(ctx, room, issuer.RoomConfig{Capacity: capacity, RatePerMinute: rate,
		SessionDuration: 5 * time.Second, Tick: 200 * time.Millisecond, TickBatch: 50, ArrivalWindow: issuer.ArrivalWindowOff})
	require.NoError(t, err)

	var mu sync.Mutex
	lane := map[string]string{} // user → "priority" (waited in the lane), "bypass" (admitted at once) or "public"
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range public + vips {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r := reps[i%2]
			if i%5 != 0 || i/5 >= vips {
				u := "p" + strconv.Itoa(i)
				_, err := r.Enter(ctx, room, u)
				if assert.NoError(t, err) {
					mu.Lock()
					lane[u] = flashgate.LanePublic
					mu.Unlock()
				}
				return
			}
			u := "v" + strconv.Itoa(i)
			o := issuer.InviteOptions{User: u}
			if i%3 == 0 {
				o.Lane = flashgate.LaneBypass
			}
			inv, err := r.Invites(room, o)
			require.NoError(t, err)
			// Two concurrent uses of one single-use invite by its holder: one place.
			var e [2]*issuer.Entry
			var inner sync.WaitGroup
			for k := range 2 {
				inner.Add(1)
				go func() {
					defer inner.Done()
					var err error
					e[k], err = reps[k].EnterWithInvite(ctx, room, u, inv[0].Token)
					assert.NoError(t, err)
				}()
			}
			inner.Wait()
			if e[0] == nil || e[1] == nil {
				return
			}
			assert.Equal(t, e[0].Arrival, e[1].Arrival, "one entry for %s", u)
			l := flashgate.LanePriority
			if e[0].State == flashgate.StateActive && e[1].State == flashgate.StateActive && e[0].Lane == "" {
				l = flashgate.LaneBypass
			}
			mu.Lock()
			lane[u] = l
			mu.Unlock()
		}()
	}

	stopSale := runSale(t, reps, room, clk)
	type adm struct {
		user             string
		seq, no, at, end int64
	}
	seen := map[string]*adm{}
	consume := func() {
		m, err := rdb.HGetAll(ctx, issuer.RoomKeys(room)[3]).Result()
		require.NoError(t, err)
		for user, jti := range m {
			a, ok := seen[jti]
			if !ok {
				id, ok := flashgate.ParseAdmissionID(jti)
				require.True(t, ok)
				a = &adm{user: user, seq: id.Arrival, no: id.Number, at: id.AdmittedAt.UnixMilli()}
				seen[jti] = a
			}
			if a.end == 0 && a.no%4 != 0 { // every fourth lapses at its session's end
				if c, err := reps[a.no%2].Complete(ctx, room, user, jti); err == nil {
					a.end = c.CompletedAt.UnixMilli()
				}
			}
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		consume()
		st, err := reps[0].Stats(ctx, room)
		require.NoError(t, err)
		if st.Admitted == public+vips || time.Now().After(deadline) {
			break
		}
		time.Sleep(3 * time.Millisecond)
	}
	wg.Wait()
	stopSale()
	consume()

	st, err := reps[0].Stats(ctx, room)
	require.NoError(t, err)
	assert.EqualValues(t, public+vips, st.Admitted, "stats %+v", st)
	assert.EqualValues(t, vips, st.InvitesUsed, "one use per single-use invite")
	assert.LessOrEqual(t, st.PeakActive, int64(capacity))
	require.Len(t, seen, public+vips)
	byUser := map[string]bool{}
	var list []*adm
	for _, a := range seen {
		assert.False(t, byUser[a.user], "%s admitted twice", a.user)
		byUser[a.user] = true
		list = append(list, a)
	}
	// FIFO within each lane (bypass admissions are around both lanes).
	sort.Slice(list, func(i, j int) bool { return list[i].seq < list[j].seq })
	last := map[string]int64{}
	counts := map[string]int{}
	for _, a := range list {
		l := lane[a.user]
		counts[l]++
		if l == flashgate.LaneBypass {
			continue
		}
		assert.Less(t, last[l], a.no, "FIFO in the %s lane: arrival %d", l, a.seq)
		last[l] = a.no
	}
	assert.Positive(t, counts[flashgate.LanePriority])
	assert.EqualValues(t, counts[flashgate.LaneBypass], st.Bypassed)
	assert.EqualValues(t, counts[flashgate.LanePriority], st.PriorityAdmitted)
	// Live ≤ capacity, recounted; the rate over every 60 s window.
	var spans [][2]int64
	ats := make([]int64, 0, len(list))
	for _, a := range list {
		end := a.at + 5000
		if a.end != 0 && a.end < end {
			end = a.end
		}
		spans = append(spans, [2]int64{a.at, end})
		ats = append(ats, a.at)
	}
	peak := peakLive(spans)
	assert.LessOrEqual(t, peak, capacity)
	maxWin := maxPerMinute(ats)
	assert.LessOrEqual(t, maxWin, rate)
	t.Logf("admitted %d (lane %d, bypass %d, public %d), peak %d/%d, max per minute %d/%d", st.Admitted,
		counts[flashgate.LanePriority], counts[flashgate.LaneBypass], counts[flashgate.LanePublic], peak, capacity, maxWin, rate)
}

// TestLanesWithLottery: in a shuffle room, the priority lane is not drawn:
// lane entries made before the opening wait in FIFO order and are admitted
// first, once the lottery has placed the public pre-queue; the public line
// then follows the drawn order; nobody is lost or admitted twice, and a
// pre-queue entry that moves to the lane leaves the pre-queue.
func TestLanesWithLottery(t *testing.T) {
	ctx := context.Background()
	opens := newClock().Now().Add(time.Minute) // laneSetup's clock starts at the same time
	is, clk, room, rdb, _ := laneSetup(t, issuer.RoomConfig{Capacity: 100, RatePerMinute: 6000, TickBatch: 100,
		PreQueue: issuer.PreQueueShuffle, Opens: opens})
	lane := map[string]string{}
	for i := 1; i <= 30; i++ {
		u := "u" + strconv.Itoa(i)
		e, err := is.Enter(ctx, room, u)
		require.NoError(t, err)
		require.True(t, e.PreQueue)
		lane[u] = flashgate.LanePublic
		if i%5 == 0 {
			v := "v" + strconv.Itoa(i)
			ve := enterInvite(t, is, room, v, invite(t, is, room, issuer.InviteOptions{}))
			assert.False(t, ve.PreQueue, "the lane is not drawn")
			assert.EqualValues(t, i/5, ve.Position, "FIFO in the lane before the opening")
			lane[v] = flashgate.LanePriority
		}
	}
	// A pre-queue entry moves to the lane: out of the pre-queue, at the lane's tail.
	moved := enterInvite(t, is, room, "u3", invite(t, is, room, issuer.InviteOptions{}))
	assert.EqualValues(t, 7, moved.Position)
	lane["u3"] = flashgate.LanePriority

	clk.Set(opens)
	for range 5 {
		_, err := is.Tick(ctx, room)
		require.NoError(t, err)
		clk.Advance(time.Second)
	}
	seqs, byUser := admittedOrder(t, rdb, room)
	require.Len(t, seqs, 36, "everyone admitted once")
	l, epoch := lotteryOf(t, is, room)
	require.True(t, l.Drawn)
	userOf := map[int64]string{}
	for u, s := range byUser {
		userOf[s] = u
	}
	var pub []int64
	for i, s := range seqs {
		if i < 7 {
			assert.Equal(t, flashgate.LanePriority, lane[userOf[s]], "admission %d: the lane first", i+1)
			if i > 0 {
				assert.Less(t, seqs[i-1], s, "FIFO within the lane")
			}
			continue
		}
		assert.Equal(t, flashgate.LanePublic, lane[userOf[s]])
		pub = append(pub, s)
	}
	score := func(s int64) int64 {
		if s <= l.Cutoff {
			return issuer.LotteryScore(l.Seed, epoch, l.Bits, s)
		}
		return s
	}
	for i := 1; i < len(pub); i++ {
		assert.Less(t, score(pub[i-1]), score(pub[i]), "the public line in the drawn order")
	}
}

// TestLanesAtTheEnd: a sold-out ends both lanes alike — lane entries read
// CLOSED, the drain empties the lane, invites are refused; after a
// reopening the tick admits no lane entry of the closed line and the lane
// works again; a deleted room refuses invites as unknown_room.
func TestLanesAtTheEnd(t *testing.T) {
	ctx := context.Background()
	is, _, room, rdb, _ := laneSetup(t, issuer.RoomConfig{Capacity: 1, RatePerMinute: 6000})
	admittedEntry(t, is, room, "alice")
	bob, err := is.Enter(ctx, room, "bob")
	require.NoError(t, err)
	v1 := enterInvite(t, is, room, "v1", invite(t, is, room, issuer.InviteOptions{}))
	v2 := enterInvite(t, is, room, "v2", invite(t, is, room, issuer.InviteOptions{}))
	require.Equal(t, flashgate.LanePriority, v2.Lane)

	_, err = is.SoldOut(ctx, room)
	require.NoError(t, err)
	for _, e := range []*issuer.Entry{v1, v2, bob} {
		st, err := is.Status(ctx, room, e.User, e.WaitingToken)
		require.NoError(t, err)
		assert.Equal(t, flashgate.StateClosed, st.State, e.User)
		assert.Equal(t, issuer.ReasonSoldOut, st.Reason, e.User)
	}
	_, err = is.EnterWithInvite(ctx, room, "v3", invite(t, is, room, issuer.InviteOptions{Lane: flashgate.LaneBypass}))
	assert.ErrorIs(t, err, flashgate.ErrRoomClosed)
	res, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 3, res.ClosedOut, "both lanes drained")
	assert.Equal(t, 0, res.Waiting)
	n, _ := rdb.ZCard(ctx, issuer.RoomKeys(room)[13]).Result()
	assert.Zero(t, n, "the priority lane is empty")
	st, err := is.Status(ctx, room, "v1", v1.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateClosed, st.State, "after the drain too")

	// Reopened before a drain: the lane's closed entries are never admitted.
	is2, _, room2, _, _ := laneSetup(t, issuer.RoomConfig{Capacity: 1, RatePerMinute: 6000})
	a2 := admittedEntry(t, is2, room2, "alice")
	w1 := enterInvite(t, is2, room2, "w1", invite(t, is2, room2, issuer.InviteOptions{}))
	_, err = is2.Close(ctx, room2, issuer.ReasonClosed)
	require.NoError(t, err)
	_, err = is2.SetState(ctx, room2, issuer.RoomOpen)
	require.NoError(t, err)
	w2 := enterInvite(t, is2, room2, "w2", invite(t, is2, room2, issuer.InviteOptions{}))
	assert.EqualValues(t, 2, w2.Position, "behind the closed entry until it is dropped")
	adm, err := is2.Exchange(ctx, room2, "alice", a2.WaitingToken)
	require.NoError(t, err)
	_, err = is2.Complete(ctx, room2, "alice", adm.ID)
	require.NoError(t, err)
	for range 2 {
		_, err = is2.Tick(ctx, room2)
		require.NoError(t, err)
	}
	st, err = is2.Status(ctx, room2, "w1", w1.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateClosed, st.State, "the closed line's lane entry stays closed")
	st, err = is2.Status(ctx, room2, "w2", w2.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateActive, st.State, "the new line's lane entry is admitted")
	stats, err := is2.Stats(ctx, room2)
	require.NoError(t, err)
	assert.EqualValues(t, 1, stats.PriorityAdmitted)

	_, err = is2.DeleteRoom(ctx, room2)
	require.NoError(t, err)
	_, err = is2.EnterWithInvite(ctx, room2, "w3", invite(t, is2, room2, issuer.InviteOptions{}))
	assert.ErrorIs(t, err, flashgate.ErrUnknownRoom, "a deleted room refuses invites as enters")
}
