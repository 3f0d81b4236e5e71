package faults_test

import (
	"context"
	"fmt"
	"strconv"
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
)

// twice is a go-redis hook that sends every EVAL and EVALSHA two times on
// the wire and keeps only the second reply: exactly what the server sees
// when the first reply is lost (timeout, dropped connection) and go-redis
// retries the command with the same arguments.
type twice struct{ repeated atomic.Int64 }

func (*twice) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*twice) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *twice) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch cmd.Name() {
		case "eval", "evalsha":
			if err := next(ctx, cmd); err != nil {
				return err // e.g. NOSCRIPT: let go-redis fall back to EVAL, itself sent twice
			}
			cmd.SetErr(nil)
			h.repeated.Add(1)
		}
		return next(ctx, cmd)
	}
}

// world is one redis-server with one issuer on it.
type world struct {
	name string
	rdb  *redis.Client
	is   *issuer.Issuer
}

func newWorld(t *testing.T, name string, clk *testkit.Clock, hook redis.Hook, def *issuer.RoomConfig) *world {
	t.Helper()
	rdb := redistest.Start(t).Client(t)
	if hook != nil {
		rdb.AddHook(hook)
	}
	ring, err := worldRing()
	require.NoError(t, err)
	is, err := issuer.New(issuer.Config{Redis: rdb, WaitingSecret: secret, Signer: ring,
		Now: clk.Now, DefaultRoom: def, Logger: quiet})
	require.NoError(t, err)
	return &world{name: name, rdb: rdb, is: is}
}

// worldRing is the one signing ring of every world: the worlds mint the same
// admission tokens, so the notes of the tokens they minted
// (fg:{room}:minted:<jti>) agree too.
var worldRing = sync.OnceValues(func() (*keys.Ring, error) { return keys.Generate(time.Now()) })

// sameData requires once's and rep's Redis data to be the same after step,
// once the notes of the tokens either minted have landed.
func sameData(t *testing.T, once, rep *world, step string) {
	t.Helper()
	require.NoError(t, once.is.WaitMinted(context.Background()))
	require.NoError(t, rep.is.WaitMinted(context.Background()))
	require.Equal(t, snapshot(t, once.rdb), snapshot(t, rep.rdb), "Redis state after %s: once vs twice", step)
}

// TestScriptsRepeatedAfterLostReply runs the same sequence of operations in
// two worlds, each on its own redis-server and with the same injected clock
// (frozen during each step, so a repeat has byte-identical arguments): in
// "once" every script runs once, in "twice" every script runs twice (the
// twice hook). After every step both worlds must hold exactly the same
// data, and the answers must be the same — or, for leave, complete and
// revoke, the documented answer to a repeat.
//
// What would make it fail: enter without its "already waiting / already
// admitted" lookups (a second INCR of seq, a new arrival and waiting token,
// or a second admission on the fast track); complete or revoke without the
// ended-record lookup (the repeat would answer not_found / completed
// instead of the first result, or count twice in stats); a tick whose rate
// bucket or capacity check were not kept in Redis (the repeat would admit
// more); leave counting "left" twice.
func TestScriptsRepeatedAfterLostReply(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	hook := &twice{}
	once := newWorld(t, "once", clk, nil, nil)
	rep := newWorld(t, "twice", clk, hook, nil)
	room := "retry"
	// capacity 2; 60/min with a 1 s tick: a bucket of 2 tokens, refilled 1/s.
	cfg := issuer.RoomConfig{Capacity: 2, RatePerMinute: 60, SessionDuration: time.Minute, Tick: time.Second}
	for _, w := range []*world{once, rep} {
		_, err := w.is.SetRoom(ctx, room, cfg)
		require.NoError(t, err)
		// One epoch for both worlds (the first script would draw one from each
		// Redis's TIME): the comparison is of script effects, ids included.
		require.NoError(t, w.rdb.HSet(ctx, roomKey(room, "config"), "epoch", "e0").Err())
		// SetRoom journaled its config with the epoch it drew: not the script effects compared.
		require.NoError(t, w.rdb.Del(ctx, roomKey(room, "journal")).Err())
	}

	same := func(step string) {
		t.Helper()
		sameData(t, once, rep, step)
	}
	enter := func(user string) (*issuer.Entry, *issuer.Entry) {
		t.Helper()
		a, err := once.is.Enter(ctx, room, user)
		require.NoError(t, err)
		b, err := rep.is.Enter(ctx, room, user)
		require.NoError(t, err)
		a.PollAfter, b.PollAfter = 0, 0 // random jitter, not state
		assert.Equal(t, a, b, "enter %s: the repeat answers like the first run", user)
		same("enter " + user)
		return a, b
	}
	tick := func(step string, want int) {
		t.Helper()
		a, err := once.is.Tick(ctx, room)
		require.NoError(t, err)
		b, err := rep.is.Tick(ctx, room)
		require.NoError(t, err)
		assert.Equal(t, want, a.Admitted, "%s: admitted by one tick", step)
		// The repeat's answer reports what the second run did: nothing.
		assert.Zero(t, b.Admitted, "%s: a repeated tick admits nothing more", step)
		assert.Zero(t, b.Expired, step)
		assert.Equal(t, a.Active, b.Active, step)
		assert.Equal(t, a.Waiting, b.Waiting, step)
		same(step)
	}
	seq := func(w *world) string {
		s, err := w.rdb.Get(ctx, roomKey(room, "seq")).Result()
		require.NoError(t, err)
		return s
	}

	// Fast track: nobody waits, capacity and rate allow.
	alice, _ := enter("alice")
	require.Equal(t, flashgate.StateActive, alice.State)
	bob, _ := enter("bob")
	require.Equal(t, flashgate.StateActive, bob.State)
	// Capacity taken: the next ones wait.
	var waiting []*issuer.Entry
	for _, u := range []string{"carol", "dave", "erin", "frank", "gina"} {
		e, _ := enter(u)
		require.Equal(t, flashgate.StateWaiting, e.State)
		waiting = append(waiting, e)
	}
	assert.Equal(t, "7", seq(rep), "the arrival counter advanced once per user")
	n, err := rep.rdb.ZCard(ctx, roomKey(room, "waiting")).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 5, n, "one waiting member per user")

	// A refresh (enter again) is itself idempotent, repeated or not.
	again, _ := enter("carol")
	assert.Equal(t, waiting[0].WaitingToken, again.WaitingToken)
	assert.EqualValues(t, 1, again.Position)

	// Status and stats are read-only: the repeat changes nothing.
	for _, e := range waiting {
		a, err := once.is.Status(ctx, room, e.User, e.WaitingToken)
		require.NoError(t, err)
		b, err := rep.is.Status(ctx, room, e.User, e.WaitingToken)
		require.NoError(t, err)
		a.PollAfter, b.PollAfter = 0, 0
		assert.Equal(t, a, b)
	}
	same("status")

	// Capacity binds: nothing to admit, however often the tick runs.
	tick("tick at capacity", 0)

	// Complete alice: the repeat answers "already completed" with the first
	// completion's time, and stats count one completion.
	clk.Advance(time.Second)
	ca, err := once.is.Complete(ctx, room, "alice", alice.AdmissionID)
	require.NoError(t, err)
	cb, err := rep.is.Complete(ctx, room, "alice", alice.AdmissionID)
	require.NoError(t, err)
	assert.False(t, ca.Repeated)
	assert.True(t, cb.Repeated, "the answer the client gets after a lost reply")
	assert.Equal(t, ca.CompletedAt, cb.CompletedAt, "the first completion's time")
	assert.Equal(t, ca.AdmissionID, cb.AdmissionID)
	same("complete")

	// Revoke bob: the repeat answers Repeated with the first time.
	ra, err := once.is.Revoke(ctx, room, "", bob.AdmissionID)
	require.NoError(t, err)
	rb, err := rep.is.Revoke(ctx, room, "", bob.AdmissionID)
	require.NoError(t, err)
	assert.False(t, ra.Repeated)
	assert.True(t, rb.Repeated)
	assert.Equal(t, ra.RevokedAt, rb.RevokedAt)
	assert.Equal(t, ra.AdmissionID, rb.AdmissionID)
	same("revoke")

	// Two places free, but the bucket holds one token (1 s at 60/min since
	// the fast tracks emptied it): the rate binds, the repeat admits nobody.
	tick("tick limited by rate", 1)
	// One more second: one more token; the first tick takes it.
	clk.Advance(time.Second)
	tick("tick limited by rate and capacity", 1)
	st, err := rep.is.Stats(ctx, room)
	require.NoError(t, err)
	st1, err := once.is.Stats(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, st1, st)
	assert.EqualValues(t, 2, st.Active)
	assert.EqualValues(t, 4, st.Admitted)
	assert.EqualValues(t, 1, st.Completed)
	assert.EqualValues(t, 1, st.Revoked)
	assert.EqualValues(t, 7, st.Entered)
	assert.LessOrEqual(t, st.PeakActive, int64(cfg.Capacity))

	// Leave, waiting (gina) and admitted (carol): the repeat finds nothing
	// left to leave (ErrNotFound) and changes nothing.
	for _, e := range []*issuer.Entry{waiting[4], waiting[0]} {
		clk.Advance(10 * time.Millisecond)
		require.NoError(t, once.is.Leave(ctx, room, e.User, e.WaitingToken))
		err := rep.is.Leave(ctx, room, e.User, e.WaitingToken)
		assert.ErrorIs(t, err, flashgate.ErrNotFound, "a repeated leave answers NOT_FOUND")
		same("leave " + e.User)
	}

	// Statistics agree, counted once.
	sa, err := once.is.Stats(ctx, room)
	require.NoError(t, err)
	sb, err := rep.is.Stats(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, sa, sb)
	assert.EqualValues(t, 2, sb.Left)
	same("stats")

	// The hook really ran every script twice on the server.
	// Executions = calls − failed calls (NOSCRIPT) of EVALSHA and EVAL.
	evals := func(w *world) int64 {
		var n int64
		for _, c := range []string{"cmdstat_evalsha", "cmdstat_eval"} {
			n += info(t, w.rdb, "commandstats", c, "calls") - info(t, w.rdb, "commandstats", c, "failed_calls")
		}
		return n
	}
	assert.Positive(t, hook.repeated.Load())
	assert.Equal(t, 2*evals(once), evals(rep), "every script ran twice in the twice world")
}

// TestRepeatedTicksRespectLimits ticks one room over and over at a clock
// that does not move, each tick itself sent twice: the admissions stop at
// the capacity (first room) and at the rate (second room), in FIFO order.
// It would fail if the tick read its limits from anything but Redis state
// written by the previous tick (live admissions, the admission log, the
// token bucket), or if ZPOPMIN were replaced by an unordered pick.
func TestRepeatedTicksRespectLimits(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	w := newWorld(t, "twice", clk, &twice{}, nil)

	for name, c := range map[string]struct {
		cfg  issuer.RoomConfig
		want int
	}{
		// batch 1: each tick admits one; capacity 3 stops it.
		"capacity": {issuer.RoomConfig{Capacity: 3, RatePerMinute: 6000, TickBatch: 1, State: issuer.RoomPaused}, 3},
		// rate 2/min with a 1 s tick: a bucket of one token.
		"rate": {issuer.RoomConfig{Capacity: 100, RatePerMinute: 2, State: issuer.RoomPaused}, 1},
	} {
		t.Run(name, func(t *testing.T) {
			room := redistest.Room(name)
			_, err := w.is.SetRoom(ctx, room, c.cfg)
			require.NoError(t, err)
			for i := range 10 {
				e, err := w.is.Enter(ctx, room, fmt.Sprintf("u%02d", i))
				require.NoError(t, err)
				require.Equal(t, flashgate.StateWaiting, e.State, "paused: everyone waits")
			}
			_, err = w.is.SetState(ctx, room, issuer.RoomOpen)
			require.NoError(t, err)
			// (A tick's answer reports its second run only; count in Redis.)
			for range 10 {
				_, err := w.is.Tick(ctx, room)
				require.NoError(t, err)
			}
			st, err := w.is.Stats(ctx, room)
			require.NoError(t, err)
			assert.EqualValues(t, c.want, st.Admitted, "admissions at a frozen clock stop at the limit")
			assert.EqualValues(t, c.want, st.Active)
			assert.EqualValues(t, 10-c.want, st.Waiting)
			assert.LessOrEqual(t, st.PeakActive, int64(c.cfg.Capacity))
			users, err := w.rdb.HGetAll(ctx, roomKey(room, "users")).Result()
			require.NoError(t, err)
			var got []string
			for u := range users {
				got = append(got, u)
			}
			var want []string
			for i := range c.want {
				want = append(want, fmt.Sprintf("u%02d", i))
			}
			assert.ElementsMatch(t, want, got, "the head of the line was admitted")
			for u, jti := range users {
				i, err := strconv.Atoi(u[1:])
				require.NoError(t, err)
				id, ok := flashgate.ParseAdmissionID(jti)
				assert.True(t, ok && id.Arrival == int64(i+1), "%s admitted with its own arrival number: %s", u, jti)
			}
		})
	}
}

// TestAutoCreatedRoomSurvivesRetriedEnter: a room created by the default
// policy on first enter must be registered with the tick loop even when
// that first enter's reply is lost and go-redis retries it.
// enter.lua reports created=1 only on the run that created the room, so
// Issuer.Enter must not register the room (SADD fg:rooms) only then: it
// registers it the first time the process sees the room, too. Fails if the
// registration depends on created=1 alone.
func TestAutoCreatedRoomSurvivesRetriedEnter(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "twice", newClock(), &twice{}, &issuer.RoomConfig{Capacity: 1, Tick: 100 * time.Millisecond})
	room := redistest.Room("auto")
	a, err := w.is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	require.Equal(t, flashgate.StateActive, a.State, "fast track in a new room")
	b, err := w.is.Enter(ctx, room, "bob")
	require.NoError(t, err)
	require.Equal(t, flashgate.StateWaiting, b.State)
	rooms, err := w.is.Rooms(ctx)
	require.NoError(t, err)
	assert.Contains(t, rooms, room, "the auto-created room is registered with the tick loop")
}

// TestPolicyScriptsRepeatedAfterLostReply is TestScriptsRepeatedAfterLostReply
// for the queue policies' scripts: every script of a sale with a shuffled
// pre-queue, a priority lane, the arrival window, a ban, a sold-out with
// its drain and a delete runs twice in the "twice" world, and after every
// step both worlds hold the same data (the seed and epoch are set alike in
// both). What would make it fail: a draw recorded again by a repeat (a new
// cutoff), the placing moving an entry twice, an invite enter taking a
// second place, a second ban record, a sold-out or delete recording a
// later end or a second closed_seq, a drain removing more than its chunk.
func TestPolicyScriptsRepeatedAfterLostReply(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	hook := &twice{}
	once := newWorld(t, "once", clk, nil, nil)
	rep := newWorld(t, "twice", clk, hook, nil)
	worlds := []*world{once, rep}
	room := "policies"
	opens := clk.Now().Add(time.Minute)
	cfg := issuer.RoomConfig{Capacity: 2, RatePerMinute: 600, SessionDuration: time.Minute, Tick: time.Second,
		ArrivalWindow: 5 * time.Second, PreQueue: issuer.PreQueueShuffle, Opens: opens}
	for _, w := range worlds {
		_, err := w.is.SetRoom(ctx, room, cfg)
		require.NoError(t, err)
		require.NoError(t, w.rdb.HSet(ctx, roomKey(room, "config"), "epoch", "e0",
			"lottery_seed", "00112233445566778899aabbccddeeff").Err())
		require.NoError(t, w.rdb.Del(ctx, roomKey(room, "journal")).Err())                    // SetRoom's event, with the epoch it drew
		require.NoError(t, w.rdb.HDel(ctx, roomKey(room, "config"), "lottery_commits").Err()) // its commitment record, likewise
	}
	same := func(step string) {
		t.Helper()
		sameData(t, once, rep, step)
	}
	both := func(step string, f func(w *world) any) {
		t.Helper()
		a, b := f(once), f(rep)
		assert.Equal(t, a, b, "%s: the repeat answers like the first run", step)
		same(step)
	}
	entry := func(e *issuer.Entry, err error) any {
		require.NoError(t, err)
		e.PollAfter = 0
		return e
	}
	tokens := map[string]string{}
	for i := range 12 {
		u := "u" + strconv.Itoa(i)
		both("enter "+u, func(w *world) any {
			e, err := w.is.Enter(ctx, room, u)
			tokens[u] = e.WaitingToken
			return entry(e, err)
		})
	}
	for _, u := range []string{"vip1", "vip2"} {
		both("invite enter "+u, func(w *world) any {
			inv, err := w.is.Invites(room, issuer.InviteOptions{User: u, Reusable: true}) // reusable: no random jti in the compared state
			require.NoError(t, err)
			e, err := w.is.EnterWithInvite(ctx, room, u, inv[0].Token)
			tokens[u] = e.WaitingToken
			return entry(e, err)
		})
	}
	both("ban u3", func(w *world) any {
		b, err := w.is.Ban(ctx, room, "u3", time.Hour, "bot")
		require.NoError(t, err)
		assert.Equal(t, w == once, b.RemovedWaiting, "the repeat finds the entry removed already")
		b.RemovedWaiting = false
		return b
	})
	clk.Advance(time.Minute) // the room opens: the first tick records the draw and places the pre-queue
	for _, step := range []string{"tick: draw, place, admit", "tick again"} {
		both(step, func(w *world) any {
			res, err := w.is.Tick(ctx, room)
			require.NoError(t, err)
			return res.Active
		})
	}
	st, err := rep.is.Stats(ctx, room)
	require.NoError(t, err)
	require.NotNil(t, st.Lottery)
	assert.True(t, st.Lottery.Drawn)
	assert.EqualValues(t, 14, st.Lottery.Cutoff, "one draw: the arrival counter at the opening")
	// Claim one admission (an exchange), let the other lapse at the arrival window.
	m, err := rep.rdb.HGetAll(ctx, roomKey(room, "users")).Result()
	require.NoError(t, err)
	require.Len(t, m, 2, "the lane's two admitted first")
	both("exchange vip1", func(w *world) any {
		a, err := w.is.Exchange(ctx, room, "vip1", tokens["vip1"])
		require.NoError(t, err)
		return a.ID
	})
	clk.Advance(6 * time.Second)
	both("tick: not claimed ends, next admitted", func(w *world) any {
		res, err := w.is.Tick(ctx, room)
		require.NoError(t, err)
		return [2]int{res.Active, res.Waiting}
	})
	both("sold out", func(w *world) any {
		c, err := w.is.SoldOut(ctx, room)
		require.NoError(t, err)
		return c
	})
	for _, step := range []string{"tick: drain", "tick after the drain"} {
		both(step, func(w *world) any {
			res, err := w.is.Tick(ctx, room)
			require.NoError(t, err)
			return res.Waiting
		})
	}
	both("status after the sold-out", func(w *world) any {
		return entry(w.is.Status(ctx, room, "u0", tokens["u0"]))
	})
	both("delete", func(w *world) any {
		c, err := w.is.DeleteRoom(ctx, room)
		require.NoError(t, err)
		return c
	})
	assert.Positive(t, hook.repeated.Load())
}
