package issuer_test

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
)

// callCounter counts the EVALSHA calls of one script and records the first
// reply element (a drain call's removed count) of each.
type callCounter struct {
	sha   string
	mu    sync.Mutex
	first []int64
}

func (h *callCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *callCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *callCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		match := len(args) > 1 && (cmd.Name() == "evalsha" && args[1] == h.sha ||
			cmd.Name() == "eval" && fmt.Sprintf("%x", sha1.Sum([]byte(fmt.Sprint(args[1])))) == h.sha) // after NOSCRIPT
		if err == nil && match {
			if r, ok := cmd.(*redis.Cmd).Val().([]any); ok && len(r) > 0 {
				n, _ := r[0].(int64)
				h.mu.Lock()
				h.first = append(h.first, n)
				h.mu.Unlock()
			}
		}
		return err
	}
}

// TestSoldOutClosesTheLine: sold out, every waiting buyer reads CLOSED
// (reason sold_out, ended_at the close) at once — the exact script near the
// head, the replica's snapshot far behind it — before any drain; enters are
// refused; an admission already made still exchanges and completes; the
// tick drains the line and counts it (closed_out), and the tokens still read
// CLOSED afterwards, where exchange is refused as room_closed.
func TestSoldOutClosesTheLine(t *testing.T) {
	ctx := context.Background()
	_, clk, room, rdb := setup(t, issuer.RoomConfig{Capacity: 1, RatePerMinute: 600})
	// The status snapshot on (an opt-in): users far behind the head are answered from it.
	is := newIssuer(t, rdb, clk, func(c *issuer.Config) { c.StatusSnapshot = issuer.SuggestedStatusSnapshot })
	alice, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	require.Equal(t, flashgate.StateActive, alice.State)
	waiting := map[string]*issuer.Entry{}
	for i := 0; i < 300; i++ {
		u := "u" + strconv.Itoa(i)
		e, err := is.Enter(ctx, room, u)
		require.NoError(t, err)
		require.Equal(t, flashgate.StateWaiting, e.State)
		waiting[u] = e
	}
	far, err := is.Status(ctx, room, "u250", waiting["u250"].WaitingToken)
	require.NoError(t, err)
	require.True(t, far.PositionEstimated, "u250 is answered from the snapshot")

	clk.Advance(time.Second)
	closedAt := clk.Now()
	cfg, err := is.SoldOut(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, issuer.RoomClosed, cfg.State)
	assert.Equal(t, issuer.ReasonSoldOut, cfg.CloseReason)
	assert.Equal(t, closedAt.UnixMilli(), cfg.EndedAt.UnixMilli())

	for _, u := range []string{"u0", "u1", "u299"} {
		e, err := is.Status(ctx, room, u, waiting[u].WaitingToken)
		require.NoError(t, err)
		assert.Equal(t, flashgate.StateClosed, e.State, u)
		assert.Equal(t, issuer.ReasonSoldOut, e.Reason, u)
		assert.Equal(t, closedAt.UnixMilli(), e.EndedAt.UnixMilli(), u)
	}
	e, err := is.Status(ctx, room, "u250", waiting["u250"].WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateClosed, e.State, "far behind the head: the closing replica dropped its snapshot")
	assert.Equal(t, issuer.ReasonSoldOut, e.Reason)
	other := newIssuer(t, rdb, clk) // another replica: a fresh snapshot says CLOSED too
	e, err = other.Status(ctx, room, "u250", waiting["u250"].WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateClosed, e.State, "from another replica's snapshot")
	assert.False(t, e.PositionEstimated)
	assert.Equal(t, closedAt.UnixMilli(), e.EndedAt.UnixMilli())

	_, err = is.Enter(ctx, room, "late")
	assert.ErrorIs(t, err, flashgate.ErrRoomClosed)
	_, err = is.Enter(ctx, room, "u3")
	assert.ErrorIs(t, err, flashgate.ErrRoomClosed, "a waiting user's enter too")

	st, err := is.Status(ctx, room, "alice", alice.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateActive, st.State, "admissions already made stand")
	adm, err := is.Exchange(ctx, room, "alice", alice.WaitingToken)
	require.NoError(t, err)
	_, err = is.Complete(ctx, room, "alice", adm.ID)
	require.NoError(t, err, "and complete")

	res, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 300, res.ClosedOut)
	assert.Equal(t, 0, res.Waiting)
	assert.Equal(t, 0, res.Admitted, "nobody admitted from a closed line, though a slot is free")
	assert.True(t, res.Ended)
	stats, err := is.Stats(ctx, room)
	require.NoError(t, err)
	assert.EqualValues(t, 300, stats.ClosedOut)
	assert.EqualValues(t, 301, stats.ClosedSeq)
	assert.EqualValues(t, 0, stats.Waiting)

	for _, u := range []string{"u0", "u250"} {
		e, err := is.Status(ctx, room, u, waiting[u].WaitingToken)
		require.NoError(t, err)
		assert.Equal(t, flashgate.StateClosed, e.State, "%s after the drain", u)
		assert.Equal(t, issuer.ReasonSoldOut, e.Reason)
		_, err = is.Exchange(ctx, room, u, waiting[u].WaitingToken)
		assert.ErrorIs(t, err, flashgate.ErrRoomClosed)
	}
	st, err = is.Status(ctx, room, "alice", alice.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateCompleted, st.State, "a completed entry stays COMPLETED")
}

// TestDrainRunsInBoundedCalls: a closed line of 3 × DrainPerCall + 5 entries
// is drained by one Tick in four drain script calls, none removing more
// than DrainPerCall; a Tick bounded by MaxDrainCallsPerTick leaves the rest
// to the next (Draining).
func TestDrainRunsInBoundedCalls(t *testing.T) {
	ctx := context.Background()
	is, _, room, rdb := setup(t, issuer.RoomConfig{Capacity: 1, State: issuer.RoomPaused})
	n := 3*issuer.DrainPerCall + 5
	fillLine(t, rdb, room, n)
	_, err := is.Close(ctx, room, "")
	require.NoError(t, err)
	h := &callCounter{sha: issuer.DrainHash}
	rdb.AddHook(h)
	res, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, n, res.ClosedOut)
	assert.Equal(t, 0, res.Draining)
	require.Len(t, h.first, 4, "ceil(n / DrainPerCall) drain calls")
	for _, removed := range h.first {
		assert.LessOrEqual(t, removed, int64(issuer.DrainPerCall))
	}
	cfg, err := is.Room(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, issuer.ReasonClosed, cfg.CloseReason)

	// More than a Tick's calls: the rest waits for the next Tick.
	room2 := redistest.Room("big")
	_, err = is.SetRoom(ctx, room2, issuer.RoomConfig{State: issuer.RoomPaused})
	require.NoError(t, err)
	big := issuer.MaxDrainCallsPerTick*issuer.DrainPerCall + 7
	fillLine(t, rdb, room2, big)
	_, err = is.SoldOut(ctx, room2)
	require.NoError(t, err)
	res, err = is.Tick(ctx, room2)
	require.NoError(t, err)
	assert.Equal(t, issuer.MaxDrainCallsPerTick*issuer.DrainPerCall, res.ClosedOut)
	assert.Equal(t, 7, res.Draining)
	res, err = is.Tick(ctx, room2)
	require.NoError(t, err)
	assert.Equal(t, 7, res.ClosedOut)
	assert.Equal(t, 0, res.Draining)
}

// TestReopenStartsANewLine: closing ends the line; reopening starts a new
// one. The closed line's entries read CLOSED after the reopening too, and
// the tick never admits one — whether the drain removes it or the
// admission step finds it at the head — while the new line is admitted.
func TestReopenStartsANewLine(t *testing.T) {
	ctx := context.Background()
	is, _, room, rdb := setup(t, issuer.RoomConfig{Capacity: 1, RatePerMinute: 6000})
	alice, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	require.Equal(t, flashgate.StateActive, alice.State)
	bob, err := is.Enter(ctx, room, "bob")
	require.NoError(t, err)
	carol, err := is.Enter(ctx, room, "carol")
	require.NoError(t, err)
	_, err = is.Close(ctx, room, issuer.ReasonClosed)
	require.NoError(t, err)
	// Reopened before any tick drained the line.
	cfg, err := is.SetState(ctx, room, issuer.RoomOpen)
	require.NoError(t, err)
	assert.True(t, cfg.EndedAt.IsZero(), "reopened: not ended")
	for _, e := range []*issuer.Entry{bob, carol} {
		st, err := is.Status(ctx, room, e.User, e.WaitingToken)
		require.NoError(t, err)
		assert.Equal(t, flashgate.StateClosed, st.State, "%s: the closed line stays closed", e.User)
		assert.Equal(t, issuer.ReasonClosed, st.Reason)
	}
	dave, err := is.Enter(ctx, room, "dave")
	require.NoError(t, err)
	require.Equal(t, flashgate.StateWaiting, dave.State)
	_, err = is.Enter(ctx, room, "bob")
	require.NoError(t, err, "bob may line up again in the new line")

	adm, err := is.Exchange(ctx, room, "alice", alice.WaitingToken)
	require.NoError(t, err)
	_, err = is.Complete(ctx, room, "alice", adm.ID)
	require.NoError(t, err)
	// The admission step pops the head first: bob's closed entry is dropped,
	// not admitted; the drain then removes carol's.
	h := &callCounter{sha: issuer.DrainHash}
	rdb.AddHook(h)
	res, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 0, res.Admitted, "the slot went to nobody of the closed line")
	assert.Equal(t, 2, res.ClosedOut)
	res, err = is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Admitted)
	d, err := is.Status(ctx, room, "dave", dave.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateActive, d.State, "the new line is admitted")
	st, err := is.Stats(ctx, room)
	require.NoError(t, err)
	assert.EqualValues(t, 2, st.Admitted, "alice and dave; never bob's or carol's closed entries")
	assert.EqualValues(t, 2, st.ClosedOut)
	old, err := is.Status(ctx, room, "carol", carol.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateClosed, old.State)
}

// pttls returns the PTTL (ms) of every existing key of room: -1 for a key
// without expiry.
func pttls(t *testing.T, rdb *redis.Client, room string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, k := range issuer.RoomKeys(room) {
		d, err := rdb.PTTL(context.Background(), k).Result()
		require.NoError(t, err)
		if d == -2*time.Nanosecond || d == -2 { // go-redis: -2 = no key
			continue
		}
		if d < 0 {
			out[k] = -1
		} else {
			out[k] = d.Milliseconds()
		}
	}
	return out
}

// TestDeleteRoomExpiresItsKeys: DELETE closes the room (reason deleted),
// its enters answer unknown_room, it leaves the listing once drained, and
// every key of the room — the user index included — expires the retention
// after the end; a key a later write creates (a completion's record) gets the
// expiry at the next tick; once the retention has passed the keys are gone
// and the tick says unknown_room. Reopening an ended room PERSISTs its keys.
func TestDeleteRoomExpiresItsKeys(t *testing.T) {
	ctx := context.Background()
	is, clk, room, rdb := setup(t, issuer.RoomConfig{Capacity: 1, RatePerMinute: 6000})
	alice, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	_, err = is.Enter(ctx, room, "bob")
	require.NoError(t, err)
	_, err = is.Ban(ctx, room, "mallory", time.Hour, "bot")
	require.NoError(t, err)
	cfg, err := is.DeleteRoom(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, issuer.ReasonDeleted, cfg.CloseReason)
	assert.False(t, cfg.DeletedAt.IsZero())
	ttl := pttls(t, rdb, room)
	require.Contains(t, ttl, issuer.RoomKeys(room)[3], "the user index exists (alice is admitted)")
	require.GreaterOrEqual(t, len(ttl), 10)
	for k, ms := range ttl {
		assert.InDelta(t, issuer.DefaultRoomRetention.Milliseconds(), ms, 10_000, "%s expires 24 h after the end", k)
	}
	_, err = is.Enter(ctx, room, "carol")
	assert.ErrorIs(t, err, flashgate.ErrUnknownRoom, "a deleted room takes no enters")
	got, err := is.Room(ctx, room)
	require.NoError(t, err, "a deleted room answers until its keys expire")
	assert.False(t, got.DeletedAt.IsZero())
	rooms, err := is.Rooms(ctx)
	require.NoError(t, err)
	assert.Contains(t, rooms, room, "listed while its line drains")
	res, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 1, res.ClosedOut)
	assert.True(t, res.Deleted)
	rooms, err = is.Rooms(ctx)
	require.NoError(t, err)
	assert.NotContains(t, rooms, room, "drained: out of the listing")

	// A late write creates a key: the completion's ended record.
	ended := issuer.RoomKeys(room)[9]
	require.NoError(t, rdb.Del(ctx, ended).Err())
	adm, err := is.Exchange(ctx, room, "alice", alice.WaitingToken)
	require.NoError(t, err)
	_, err = is.Complete(ctx, room, "alice", adm.ID)
	require.NoError(t, err, "an admission made before the delete completes")
	assert.EqualValues(t, -1, pttls(t, rdb, room)[ended], "created without an expiry")
	clk.Advance(time.Minute)
	_, err = is.Tick(ctx, room)
	require.NoError(t, err)
	assert.InDelta(t, (issuer.DefaultRoomRetention - time.Minute).Milliseconds(), pttls(t, rdb, room)[ended], 10_000,
		"the tick gave it the room's expiry")

	clk.Advance(issuer.DefaultRoomRetention)
	_, err = is.Tick(ctx, room) // the retention has passed: the keys expire now
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(pttls(t, rdb, room)) == 0 }, 5*time.Second, 10*time.Millisecond,
		"every key of the room is gone")
	_, err = is.Tick(ctx, room)
	assert.ErrorIs(t, err, flashgate.ErrUnknownRoom)

	// Reopening an ended room keeps its keys again.
	r2 := redistest.Room("reopen")
	_, err = is.SetRoom(ctx, r2, issuer.RoomConfig{Capacity: 1, Retention: 2 * time.Hour})
	require.NoError(t, err)
	_, err = is.Enter(ctx, r2, "x")
	require.NoError(t, err)
	_, err = is.Close(ctx, r2, "")
	require.NoError(t, err)
	for k, ms := range pttls(t, rdb, r2) {
		assert.InDelta(t, (2 * time.Hour).Milliseconds(), ms, 10_000, "%s: the room's own retention", k)
	}
	_, err = is.SetState(ctx, r2, issuer.RoomOpen)
	require.NoError(t, err)
	for k, ms := range pttls(t, rdb, r2) {
		assert.EqualValues(t, -1, ms, "%s: PERSISTed on reopening", k)
	}
}

// TestEventWindowEndsTheLine: when closes_at passes, the waiting entries
// read CLOSED, reason event_ended, at once; the first tick records the end
// at closes_at and drains the line; moving closes_at later reopens the room
// (a new line) and keeps its keys again.
func TestEventWindowEndsTheLine(t *testing.T) {
	ctx := context.Background()
	start := newClock().Now()
	closes := start.Add(time.Minute)
	is, clk, room, rdb := setup(t, issuer.RoomConfig{Capacity: 1, RatePerMinute: 600, Closes: closes,
		ArrivalWindow: issuer.ArrivalWindowOff})
	_, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	bob, err := is.Enter(ctx, room, "bob")
	require.NoError(t, err)
	require.Equal(t, flashgate.StateWaiting, bob.State)

	clk.Advance(90 * time.Second)
	e, err := is.Status(ctx, room, "bob", bob.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateClosed, e.State)
	assert.Equal(t, issuer.ReasonEventEnded, e.Reason)
	res, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 1, res.ClosedOut)
	assert.True(t, res.Ended)
	cfg, err := is.Room(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, issuer.ReasonEventEnded, cfg.CloseReason)
	assert.Equal(t, closes.UnixMilli(), cfg.EndedAt.UnixMilli(), "ended at closes_at")
	for k, ms := range pttls(t, rdb, room) {
		assert.InDelta(t, (issuer.DefaultRoomRetention - 30*time.Second).Milliseconds(), ms, 10_000, "%s", k)
	}
	e, err = is.Status(ctx, room, "bob", bob.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateClosed, e.State)
	assert.Equal(t, closes.UnixMilli(), e.EndedAt.UnixMilli())

	later := clk.Now().Add(time.Hour)
	_, _, err = is.UpdateRoom(ctx, room, issuer.RoomPatch{Closes: &later})
	require.NoError(t, err)
	for k, ms := range pttls(t, rdb, room) {
		assert.EqualValues(t, -1, ms, "%s: reopened, kept", k)
	}
	carol, err := is.Enter(ctx, room, "carol")
	require.NoError(t, err, "a new line")
	assert.Equal(t, flashgate.StateWaiting, carol.State)
	e, err = is.Status(ctx, room, "bob", bob.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateClosed, e.State, "the ended line stays ended")
}

// TestAutoRoomsAreLimitedAcrossReplicas: two replicas with the default
// policy and MaxAutoRooms 5 race to create 24 rooms: exactly 5 exist, the
// other enters are refused as room_limit, and rooms that exist take enters.
// An idle auto room is deleted by the tick and its slot freed, so a new
// room can be created.
func TestAutoRoomsAreLimitedAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	clk := newClock()
	opts := func(c *issuer.Config) {
		c.DefaultRoom = &issuer.RoomConfig{Capacity: 10, RatePerMinute: 6000}
		c.MaxAutoRooms = 5
		c.AutoRoomIdle = time.Minute
	}
	a, b := newIssuer(t, rdb, clk, opts), newIssuer(t, rdb, clk, opts)
	var mu sync.Mutex
	created, limited := map[string]bool{}, 0
	var wg sync.WaitGroup
	for i := 0; i < 24; i++ {
		for j, is := range []*issuer.Issuer{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				room := fmt.Sprintf("auto-%d", i)
				_, err := is.Enter(ctx, room, "u"+strconv.Itoa(j))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					created[room] = true
				case errors.Is(err, flashgate.ErrRoomLimit):
					limited++
				default:
					t.Errorf("enter %s: %v", room, err)
				}
			}()
		}
	}
	wg.Wait()
	assert.Len(t, created, 5, "never above the limit")
	exist := 0
	for i := 0; i < 24; i++ {
		if n, _ := rdb.Exists(ctx, issuer.RoomKeys(fmt.Sprintf("auto-%d", i))[0]).Result(); n == 1 {
			exist++
		}
	}
	assert.Equal(t, 5, exist, "rooms in Redis")
	held, err := a.AutoRooms(ctx)
	require.NoError(t, err)
	assert.Len(t, held, 5)
	var one string
	for r := range created {
		one = r
		cfg, err := a.Room(ctx, r)
		require.NoError(t, err)
		assert.True(t, cfg.Auto, "%s is marked auto", r)
	}
	_, err = b.Enter(ctx, one, "another")
	require.NoError(t, err, "an existing auto room takes enters")
	_, err = a.Enter(ctx, "auto-new", "x")
	require.ErrorIs(t, err, flashgate.ErrRoomLimit)

	// Idle: the admissions lapse (5 min session), then a minute of nothing.
	clk.Advance(issuer.DefaultSessionDuration + time.Second)
	for r := range created {
		_, err := a.Tick(ctx, r)
		require.NoError(t, err)
	}
	clk.Advance(time.Minute)
	res, err := b.Tick(ctx, one)
	require.NoError(t, err)
	assert.True(t, res.Deleted, "idle for AutoRoomIdle: deleted")
	cfg, err := a.Room(ctx, one)
	require.NoError(t, err)
	assert.Equal(t, issuer.ReasonDeleted, cfg.CloseReason)
	held, err = a.AutoRooms(ctx)
	require.NoError(t, err)
	assert.Len(t, held, 4, "its slot is free")
	assert.NotContains(t, held, one)
	_, err = a.Enter(ctx, "auto-new", "x")
	require.NoError(t, err, "a new auto room takes the slot")
	_, err = a.Enter(ctx, one, "y")
	assert.ErrorIs(t, err, flashgate.ErrRoomLimit, "its name is free (nothing sold), but a new room needs a slot")
	held, err = a.AutoRooms(ctx)
	require.NoError(t, err)
	assert.Len(t, held, 5)
}

// TestIdleAutoRoomFreesItsName: an auto room deleted idle with nothing sold
// frees its name at once (issue 23 §5: a name squatted early is not lost for
// the retention): an enter, on either replica, creates the room anew — a new
// epoch, open, the journal kept — within the auto rooms' cap. A room that
// sold something keeps its name for the retention, as DELETE does.
func TestIdleAutoRoomFreesItsName(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	clk := newClock()
	ring, err := keys.Generate(clk.Now())
	require.NoError(t, err)
	opts := func(c *issuer.Config) {
		c.DefaultRoom = &issuer.RoomConfig{Capacity: 10, RatePerMinute: 6000}
		c.MaxAutoRooms = 5
		c.AutoRoomIdle = time.Minute
		c.Signer = ring // signs invites too
	}
	a, b := newIssuer(t, rdb, clk, opts), newIssuer(t, rdb, clk, opts)
	squat, sold := redistest.Room("squat"), redistest.Room("sold")
	first := map[string]*issuer.Entry{}
	for _, r := range []string{squat, sold} {
		e, err := a.Enter(ctx, r, "early")
		require.NoError(t, err)
		require.Equal(t, flashgate.StateActive, e.State)
		first[r] = e
	}
	adm, err := a.Exchange(ctx, sold, "early", first[sold].WaitingToken)
	require.NoError(t, err)
	_, err = a.Complete(ctx, sold, "early", adm.ID)
	require.NoError(t, err)
	old, err := a.Stats(ctx, squat)
	require.NoError(t, err)

	// Idle: the admissions lapse, then a minute of nothing; b ticks too (it
	// then knows the rooms as deleted).
	clk.Advance(issuer.DefaultSessionDuration + time.Second)
	for _, r := range []string{squat, sold} {
		_, err := a.Tick(ctx, r)
		require.NoError(t, err)
	}
	clk.Advance(time.Minute)
	for _, r := range []string{squat, sold} {
		res, err := a.Tick(ctx, r)
		require.NoError(t, err)
		require.True(t, res.Deleted, r)
		_, err = b.Tick(ctx, r)
		require.NoError(t, err)
	}
	held, err := a.AutoRooms(ctx)
	require.NoError(t, err)
	assert.Empty(t, held)

	_, err = b.Enter(ctx, sold, "late")
	assert.ErrorIs(t, err, flashgate.ErrUnknownRoom, "sold something: the name is kept for the retention")

	again, err := b.Enter(ctx, squat, "late")
	require.NoError(t, err, "nothing sold: the name is free at once")
	assert.True(t, again.Created)
	assert.Equal(t, flashgate.StateActive, again.State)
	cfg, err := a.Room(ctx, squat)
	require.NoError(t, err)
	assert.Equal(t, issuer.RoomOpen, cfg.State)
	assert.True(t, cfg.DeletedAt.IsZero())
	assert.Empty(t, cfg.CloseReason)
	assert.True(t, cfg.Auto)
	now, err := a.Stats(ctx, squat)
	require.NoError(t, err)
	assert.NotEqual(t, old.Epoch, now.Epoch, "a new room: a new epoch")
	assert.EqualValues(t, 1, now.Entered, "its counters start again")
	held, err = a.AutoRooms(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{squat}, held, "it holds a slot again")
	ttl, err := rdb.PTTL(ctx, issuer.RoomKeys(squat)[16]).Result()
	require.NoError(t, err)
	assert.Less(t, ttl, time.Duration(0), "the journal is kept, without the old room's expiry")
	n, err := rdb.XLen(ctx, issuer.RoomKeys(squat)[16]).Result()
	require.NoError(t, err)
	assert.Greater(t, n, int64(2), "the old room's events, then the new room's")
	st, err := a.Status(ctx, squat, "early", first[squat].WaitingToken)
	if err == nil {
		assert.NotEqual(t, flashgate.StateActive, st.State, "the old room's token holds nothing in the new one")
	}
	res, err := a.Tick(ctx, squat) // a knew the room as deleted: it ticks the new one
	require.NoError(t, err)
	assert.False(t, res.Deleted)
	assert.EqualValues(t, 1, res.Active)

	// Invites create a freed room too.
	clk.Advance(issuer.DefaultSessionDuration + time.Second)
	_, err = a.Tick(ctx, squat)
	require.NoError(t, err)
	clk.Advance(time.Minute)
	res, err = a.Tick(ctx, squat)
	require.NoError(t, err)
	require.True(t, res.Deleted)
	inv, err := a.Invites(squat, issuer.InviteOptions{})
	require.NoError(t, err)
	e, err := a.EnterWithInvite(ctx, squat, "vip", inv[0].Token)
	require.NoError(t, err)
	assert.True(t, e.Created)
}

// TestSoldOutUnderConcurrency: two replicas take enters and tick at once
// while the room sells out: nobody is admitted after the sold-out, every
// entry ends either admitted before it or CLOSED (reason sold_out), the line
// drains to empty, and live admissions never exceed capacity.
func TestSoldOutUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	clk := newClock()
	a, b := newIssuer(t, rdb, clk), newIssuer(t, rdb, clk)
	room := redistest.Room("race")
	_, err := a.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 20, RatePerMinute: 100_000, TickBatch: 50})
	require.NoError(t, err)

	var mu sync.Mutex
	entries := map[string]*issuer.Entry{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, is := range []*issuer.Issuer{a, b} { // ticking replicas
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := is.Tick(ctx, room)
				assert.NoError(t, err)
			}
		}()
	}
	var enters sync.WaitGroup
	enter := func(i int) {
		defer enters.Done()
		is := []*issuer.Issuer{a, b}[i%2]
		u := "u" + strconv.Itoa(i)
		e, err := is.Enter(ctx, room, u)
		if errors.Is(err, flashgate.ErrRoomClosed) {
			return
		}
		if !assert.NoError(t, err) {
			return
		}
		mu.Lock()
		entries[u] = e
		mu.Unlock()
	}
	for i := 0; i < 200; i++ { // a line forms while the ticks admit
		enters.Add(1)
		go enter(i)
	}
	enters.Wait()
	for i := 200; i < 400; i++ { // more arrive as it sells out
		enters.Add(1)
		go enter(i)
		if i == 300 {
			_, err := b.SoldOut(ctx, room)
			require.NoError(t, err)
		}
	}
	enters.Wait()
	for i := 0; i < 50; i++ { // let the ticks drain what is left
		res, err := a.Tick(ctx, room)
		require.NoError(t, err)
		if res.Waiting == 0 && res.Draining == 0 {
			break
		}
	}
	close(stop)
	wg.Wait()

	st, err := a.Stats(ctx, room)
	require.NoError(t, err)
	assert.EqualValues(t, 0, st.Waiting, "drained")
	assert.LessOrEqual(t, st.PeakActive, int64(20))
	closed, admitted := 0, 0
	for u, e := range entries {
		s, err := a.Status(ctx, room, u, e.WaitingToken)
		require.NoError(t, err)
		switch s.State {
		case flashgate.StateClosed:
			closed++
			assert.Equal(t, issuer.ReasonSoldOut, s.Reason)
			assert.LessOrEqual(t, s.Arrival, st.ClosedSeq)
		case flashgate.StateActive:
			admitted++
		default:
			t.Errorf("%s: %s", u, s.State)
		}
	}
	assert.EqualValues(t, admitted, st.Admitted, "every admission is one made before the sold-out, seen as ACTIVE")
	assert.EqualValues(t, closed, st.ClosedOut, "every entry still waiting at the sold-out was drained, and reads CLOSED")
	assert.EqualValues(t, st.Entered, st.ClosedSeq, "no entry after the sold-out")
	t.Logf("%d admitted, %d closed, %d entries", admitted, closed, st.Entered)
	require.Positive(t, admitted)
	require.Positive(t, closed)
}
