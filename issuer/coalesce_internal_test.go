package issuer

import (
	"context"
	"errors"
	"runtime"
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
	"github.com/flashgate/flashgate/journal"
)

// dumpEvents is redistest.Dump with room's journal stream as the events it
// holds (journal.StreamEvents, without stream ids): a batched call writes its
// events as one stream entry, one call per item as one entry each.
func dumpEvents(t *testing.T, rdb *redis.Client, room string) map[string]any {
	t.Helper()
	d := redistest.Dump(t, rdb, false)
	k := "stream " + roomKeys(room)[16]
	var evs []journal.Event
	for _, m := range d[k].([]map[string]any) {
		e, bad := journal.StreamEvents(room, "", func(f string) string { v, _ := m[f].(string); return v })
		require.Empty(t, bad)
		evs = append(evs, e...)
	}
	d[k] = evs
	return d
}

// twin is one of two worlds that run the same operations, one batch per
// call in one and one item per call in the other, on their own
// redis-servers with one injected clock and one epoch, so their data can be
// compared byte for byte.
type twin struct {
	is  *Issuer
	rdb *redis.Client
}

func twins(t *testing.T, room string, cfg RoomConfig, now *atomic.Int64) (batched, single twin) {
	t.Helper()
	ctx := context.Background()
	mk := func() twin {
		rdb := redistest.Start(t).Client(t)
		is, err := New(Config{Redis: rdb, WaitingSecret: []byte(strings.Repeat("s", 32)),
			Now: func() time.Time { return time.UnixMilli(now.Load()) }})
		require.NoError(t, err)
		_, err = is.SetRoom(ctx, room, cfg)
		require.NoError(t, err)
		// One epoch for both worlds (the first script would draw one from each
		// Redis's TIME); SetRoom's journal entry carries the one it drew.
		require.NoError(t, rdb.HSet(ctx, roomKeys(room)[0], "epoch", "e0").Err())
		require.NoError(t, rdb.Del(ctx, roomKeys(room)[16]).Err())
		return twin{is, rdb}
	}
	return mk(), mk()
}

// One complete script call for several admissions answers and writes
// exactly what one call per admission, in the same order, does: a
// duplicate is the first one's repeat, and every refusal (stale, unknown,
// another user's, lapsed, never claimed in time, left) is its item's own.
func TestCompleteBatchIsSequential(t *testing.T) {
	ctx := context.Background()
	var now atomic.Int64
	now.Store(1_700_000_000_000)
	room := redistest.Room("cbatch")
	cfg := RoomConfig{Capacity: 100, RatePerMinute: 6000, SessionDuration: 10 * time.Second,
		ArrivalWindow: 5 * time.Second, State: RoomOpen}
	batched, single := twins(t, room, cfg, &now)

	enter := func(users ...string) map[string]string {
		jtis := map[string]string{}
		for _, w := range []twin{batched, single} {
			got, err := w.is.enterUsers(ctx, room, anys(users)...)
			require.NoError(t, err)
			for i, e := range got {
				require.Equal(t, flashgate.StateActive, e.state, users[i])
				if w.is == batched.is {
					jtis[users[i]] = e.jti
				} else {
					require.Equal(t, jtis[users[i]], e.jti, "the twins admit alike")
				}
			}
		}
		return jtis
	}
	claim := func(user, jti string) {
		seq, _ := flashgate.ParseAdmissionID(jti)
		for _, w := range []twin{batched, single} {
			_, err := w.is.statusItems(ctx, room, []statusItem{{user: user, seq: seq.Arrival, epoch: "e0", claim: true}})
			require.NoError(t, err)
		}
	}
	old := enter("lapsed", "unclaimed")
	claim("lapsed", old["lapsed"])
	now.Add(11_000) // both lapsed: "lapsed" its session, "unclaimed" its arrival window too
	j := enter("alice", "bob", "carol", "left")
	for _, u := range []string{"alice", "bob", "carol"} {
		claim(u, j[u])
	}
	for _, w := range []twin{batched, single} { // "left" leaves: its admission ends
		_, err := w.is.db.Leave(ctx, room, "left", mustSeq(t, j["left"]), "e0")
		require.NoError(t, err)
	}
	now.Add(1000)
	for _, w := range []twin{batched, single} { // the notes of minted tokens (noteMinted)
		err := w.is.mintedItems(ctx, room, []mintedItem{{j["carol"], "d-carol", 60_000}, {j["bob"], "d-bob", 60_000}})
		require.NoError(t, err)
	}

	items := []completeItem{
		{"alice", j["alice"], ""},
		{"alice", j["alice"], ""},               // a repeat within the batch
		{"bob", j["carol"], ""},                 // another user's admission
		{"bob", "zz.1.1.1", ""},                 // an earlier epoch's
		{"bob", "e0.999.999.1700000000000", ""}, // unknown
		{"lapsed", old["lapsed"], ""},
		{"unclaimed", old["unclaimed"], ""},
		{"unclaimed", old["unclaimed"], ""}, // refused again: expired
		{"left", j["left"], ""},
		{"bob", j["bob"], "not-bobs-token"}, // a digest that is not the note: nothing happens
		{"bob", j["bob"], ""},
		{"carol", j["carol"], "d-carol"}, // the note's digest: completes
		{"bob", j["bob"], ""},
	}
	got, err := batched.is.completeItems(ctx, room, items)
	require.NoError(t, err)
	require.Len(t, got, len(items))
	for i, it := range items {
		want, err := single.is.completeItems(ctx, room, []completeItem{it})
		require.NoError(t, err)
		assert.Equal(t, want[0], got[i], "item %d %v: batched vs alone", i, it)
	}
	codes := make([]flashgate.Code, len(got))
	for i, o := range got {
		codes[i] = codeOf(o.err)
	}
	assert.Equal(t, []flashgate.Code{"", "", flashgate.CodeOwnerMismatch, flashgate.CodeNotFound, flashgate.CodeNotFound,
		flashgate.CodeExpired, flashgate.CodeExpired, flashgate.CodeExpired, flashgate.CodeNotFound, "", "", "", ""}, codes)
	assert.False(t, got[0].res.repeated)
	assert.True(t, got[1].res.repeated, "the second completion of a jti in a batch is its repeat")
	assert.Equal(t, got[0].res.at, got[1].res.at)
	assert.ErrorIs(t, got[9].err, ErrNotMinted)
	assert.False(t, got[10].res.repeated, "the refused digest changed nothing: bob's first completion")
	assert.NoError(t, got[11].err)
	assert.False(t, got[11].res.repeated, "carol, completed by her token's note")
	assert.True(t, got[12].res.repeated)
	assert.Equal(t, dumpEvents(t, single.rdb, room), dumpEvents(t, batched.rdb, room), "Redis data: one call vs one call per admission")

	// A retry of the whole batch (a lost reply) answers each item as a retry
	// of that item alone does (a completion: its repeat), and writes nothing.
	before := redistest.Dump(t, batched.rdb, false)
	again, err := batched.is.completeItems(ctx, room, items)
	require.NoError(t, err)
	for i, it := range items {
		want, err := single.is.completeItems(ctx, room, []completeItem{it})
		require.NoError(t, err)
		assert.Equal(t, want[0], again[i], "retried item %d %v: batched vs alone", i, it)
		if got[i].err == nil {
			assert.True(t, again[i].res.repeated, "item %d", i)
			assert.Equal(t, got[i].res.at, again[i].res.at, "item %d", i)
		}
	}
	after := redistest.Dump(t, batched.rdb, false)
	delete(before, roomKeys(room)[16]) // (the journal: the first run's events only, checked above)
	delete(after, roomKeys(room)[16])
	assert.Equal(t, before, after, "a repeated batch writes nothing")
}

// One status script call for several tokens answers and writes exactly
// what one call per token does: WAITING in either lane, ACTIVE with and
// without a claim, a repeated claim, COMPLETED, an earlier epoch's token.
func TestStatusBatchIsSequential(t *testing.T) {
	ctx := context.Background()
	var now atomic.Int64
	now.Store(1_700_000_000_000)
	room := redistest.Room("sbatch")
	cfg := RoomConfig{Capacity: 2, RatePerMinute: 6000, SessionDuration: 10 * time.Second,
		ArrivalWindow: 5 * time.Second, State: RoomOpen}
	batched, single := twins(t, room, cfg, &now)
	var es []scriptEntry
	for _, w := range []twin{batched, single} {
		got, err := w.is.enterUsers(ctx, room, "a1", "a2", "w1", "w2", "w3")
		require.NoError(t, err)
		es = got
	}
	require.Equal(t, flashgate.StateActive, es[0].state)
	require.Equal(t, flashgate.StateWaiting, es[4].state)
	for _, w := range []twin{batched, single} { // a2 completes
		_, err := w.is.completeItems(ctx, room, []completeItem{{"a2", es[1].jti, ""}})
		require.NoError(t, err)
	}
	now.Add(1000)
	it := func(i int, user string, claim bool) statusItem {
		return statusItem{user: user, seq: es[i].seq, epoch: "e0", claim: claim}
	}
	items := []statusItem{
		it(0, "a1", false), it(0, "a1", true), it(0, "a1", true), it(0, "a1", false),
		it(2, "w1", false), it(4, "w3", true), it(3, "w2", false),
		it(1, "a2", false), it(1, "a2", true),
		{user: "w1", seq: es[2].seq, epoch: "old", claim: false},
		it(2, "w2", false), // another user's seq: NOT_FOUND
	}
	got, states := batchedVsAlone(t, batched, single, room, items)
	assert.Equal(t, []flashgate.State{"ACTIVE", "ACTIVE", "ACTIVE", "ACTIVE", "WAITING", "WAITING", "WAITING",
		"COMPLETED", "COMPLETED", "NOT_FOUND", "NOT_FOUND"}, states)
	assert.Equal(t, []int64{1, 3, 2}, []int64{got[4].res.pos, got[5].res.pos, got[6].res.pos})
	assert.True(t, got[4].res.hasETA)
	assert.Equal(t, dumpEvents(t, single.rdb, room), dumpEvents(t, batched.rdb, room), "Redis data: one call vs one call per token")
	n, err := batched.rdb.ZCard(ctx, roomKeys(room)[12]).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "a1's claim took it out of the unclaimed set")
	st := batched.is.Observe().Batches
	assert.Equal(t, BatchStats{Calls: 1, Items: 7}, st.Status, "the mixed call counts its plain items under Status")
	assert.Equal(t, BatchStats{Calls: 1, Items: 4}, st.Exchange, "and its claims under Exchange")

	// The call's epoch is its first token's (statusItems): a call led by an
	// earlier epoch's token, with an empty epoch among them, answers the
	// current epoch's tokens as before.
	items = append([]statusItem{items[9], {user: "w3", seq: es[4].seq, epoch: "", claim: true}}, items[:9]...)
	_, states = batchedVsAlone(t, batched, single, room, items)
	assert.Equal(t, []flashgate.State{"NOT_FOUND", "NOT_FOUND", "ACTIVE", "ACTIVE", "ACTIVE", "ACTIVE", "WAITING",
		"WAITING", "WAITING", "COMPLETED", "COMPLETED"}, states)
	assert.Equal(t, dumpEvents(t, single.rdb, room), dumpEvents(t, batched.rdb, room), "Redis data: one call vs one call per token")
}

// A call with more claims than one journal entry holds (JOURNAL_BATCH_MAX,
// 256: lua/prelude.lua) writes them as one call per claim does: every
// claimed admission leaves the unclaimed set, every exchanged event is
// journaled in order, in entries of at most 256 events.
func TestStatusManyClaimsIsSequential(t *testing.T) {
	ctx := context.Background()
	var now atomic.Int64
	now.Store(1_700_000_000_000)
	room := redistest.Room("sclaims")
	cfg := RoomConfig{Capacity: 1000, RatePerMinute: 10_000_000, SessionDuration: time.Minute,
		ArrivalWindow: 5 * time.Second, State: RoomOpen}
	batched, single := twins(t, room, cfg, &now)
	users := make([]any, 300)
	for i := range users {
		users[i] = "u" + strconv.Itoa(i)
	}
	var es []scriptEntry
	for _, w := range []twin{batched, single} {
		got, err := w.is.enterUsers(ctx, room, users...)
		require.NoError(t, err)
		es = got
	}
	now.Add(1000)
	var items []statusItem
	for i, e := range es {
		require.Equal(t, flashgate.StateActive, e.state)
		items = append(items, statusItem{user: users[i].(string), seq: e.seq, epoch: "e0", claim: true})
	}
	items = append(items, items[0], items[299]) // repeated claims, after the first journal entry
	_, states := batchedVsAlone(t, batched, single, room, items)
	for i, st := range states {
		require.Equal(t, flashgate.StateActive, st, "item %d", i)
	}
	assert.Equal(t, dumpEvents(t, single.rdb, room), dumpEvents(t, batched.rdb, room), "Redis data: one call vs one call per token")
	n, err := batched.rdb.ZCard(ctx, roomKeys(room)[12]).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "every claim took its admission out of the unclaimed set")
	entries, err := batched.rdb.XRange(ctx, roomKeys(room)[16], "-", "+").Result()
	require.NoError(t, err)
	var sizes []int
	for _, x := range entries {
		sizes = append(sizes, len(strings.Split(x.Values["events"].(string), "\n")))
	}
	assert.Equal(t, []int{256, 256, 88, 256, 46}, sizes, "the enter's 600 events (entered, admitted), then the claims' 302 in two entries")
}

// batchedVsAlone runs items in one status script call on batched and one
// call per item on single, checks that each item reads the same, and
// returns the batched answers and their states.
func batchedVsAlone(t *testing.T, batched, single twin, room string, items []statusItem) ([]outcome[scriptEntry], []flashgate.State) {
	t.Helper()
	ctx := context.Background()
	got, err := batched.is.statusItems(ctx, room, items)
	require.NoError(t, err)
	require.Len(t, got, len(items))
	var states []flashgate.State
	for i, x := range items {
		want, err := single.is.statusItems(ctx, room, []statusItem{x})
		require.NoError(t, err)
		assert.Equal(t, want[0], got[i], "item %d %+v: batched vs alone", i, x)
		states = append(states, got[i].res.state)
	}
	return got, states
}

// queued waits until c has n callers queued (each caller goroutine has
// reached it): no time limit of its own, the test's deadline bounds it.
func queued[T, R any](c *coalescer[T, R], n int) {
	for {
		c.mu.Lock()
		k := len(c.queue)
		c.mu.Unlock()
		if k >= n {
			return
		}
		runtime.Gosched()
	}
}

// Callers queued behind a call in flight go together in one call; each one's
// own refusal reaches it alone, and a caller that gave up is left out and
// answered flashgate.ErrUnavailable.
func TestCompleteCoalescedPerItem(t *testing.T) {
	ctx := context.Background()
	is, _, room := batchIssuer(t, 0, RoomConfig{Capacity: 10, RatePerMinute: 6000})
	es, err := is.enterUsers(ctx, room, "a", "b")
	require.NoError(t, err)
	b := is.roomBatch(room).complete
	b.mu.Lock()
	b.busy = true // a call in flight: the callers below queue
	b.mu.Unlock()
	base := is.Observe().Batches.Complete

	type res struct {
		c   *flashgate.Completion
		err error
	}
	out := make([]res, 4)
	var wg sync.WaitGroup
	gone, cancel := context.WithCancel(ctx)
	calls := []struct {
		ctx       context.Context
		user, jti string
	}{{ctx, "b", es[0].jti}, {ctx, "a", es[0].jti}, {gone, "b", es[1].jti}, {ctx, "a", es[0].jti}}
	for i, c := range calls {
		wg.Go(func() {
			r, err := is.Complete(c.ctx, room, c.user, c.jti)
			out[i] = res{r, err}
		})
		queued(b, i+1) // in this order
	}
	cancel()
	b.run(nil) // the call in flight ends: the queue goes in one call
	wg.Wait()

	assert.ErrorIs(t, out[0].err, flashgate.ErrOwnerMismatch, "b with a's admission, alone")
	require.NoError(t, out[1].err)
	assert.False(t, out[1].c.Repeated)
	assert.ErrorIs(t, out[2].err, flashgate.ErrUnavailable, "b gave up")
	require.NoError(t, out[3].err)
	assert.True(t, out[3].c.Repeated)
	st := is.Observe().Batches.Complete
	assert.Equal(t, BatchStats{Calls: 1, Items: 3}, BatchStats{st.Calls - base.Calls, st.Items - base.Items},
		"one call, without the caller who gave up")
	b.mu.Lock()
	assert.False(t, b.busy, "idle again")
	b.mu.Unlock()
	// b's admission is untouched: b completes it now.
	c, err := is.Complete(ctx, room, "b", es[1].jti)
	require.NoError(t, err)
	assert.False(t, c.Repeated)
}

// A whole-call failure (here an unknown room) reaches every caller of the
// batch, statuses and exchanges alike.
func TestStatusCoalescedWholeCallError(t *testing.T) {
	ctx := context.Background()
	is, _, room := batchIssuer(t, 0, RoomConfig{State: RoomPaused})
	var toks []string
	for _, u := range []string{"a", "b", "c"} {
		e, err := is.Enter(ctx, room, u)
		require.NoError(t, err)
		toks = append(toks, e.WaitingToken)
	}
	other := redistest.Room("gone") // tokens of a room never created
	for i, u := range []string{"a", "b", "c"} {
		toks[i] = is.secrets.Load().current.token(other, u, "e0", int64(i+1))
	}
	b := is.roomBatch(other).status
	b.mu.Lock()
	b.busy = true
	b.mu.Unlock()
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i, u := range []string{"a", "b", "c"} {
		wg.Go(func() {
			if i == 1 {
				_, errs[i] = is.Exchange(ctx, other, u, toks[i])
				return
			}
			_, errs[i] = is.Status(ctx, other, u, toks[i])
		})
		queued(b, i+1)
	}
	b.run(nil)
	wg.Wait()
	for i, err := range errs {
		assert.ErrorIs(t, err, flashgate.ErrUnknownRoom, "caller %d", i)
	}
	st := is.Observe().Batches
	assert.Equal(t, BatchStats{Calls: 1, Items: 2}, st.Status)
	assert.Equal(t, BatchStats{Calls: 1, Items: 1}, st.Exchange)
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func mustSeq(t *testing.T, jti string) int64 {
	t.Helper()
	id, ok := flashgate.ParseAdmissionID(jti)
	require.True(t, ok, jti)
	return id.Arrival
}

// codeOf is err's domain code ("" for nil).
func codeOf(err error) flashgate.Code {
	var e *flashgate.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// With batches of one (EnterBatch 1: no coalescing) every call goes alone
// and at once: a call in flight for the room holds nobody back.
func TestBatchOfOneBypassesTheQueue(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a queued call would wait this out
	defer cancel()
	is, _, room := batchIssuer(t, 1, RoomConfig{Capacity: 10, RatePerMinute: 6000})
	rb := is.roomBatch(room)
	for _, mu := range []*sync.Mutex{&rb.enter.mu, &rb.status.mu, &rb.complete.mu} {
		mu.Lock()
	}
	rb.enter.busy, rb.status.busy, rb.complete.busy = true, true, true // as if calls were in flight
	for _, mu := range []*sync.Mutex{&rb.enter.mu, &rb.status.mu, &rb.complete.mu} {
		mu.Unlock()
	}
	e, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	require.Equal(t, flashgate.StateActive, e.State)
	st, err := is.Status(ctx, room, "alice", e.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateActive, st.State)
	ref, err := is.checkWaiting(room, "alice", e.WaitingToken)
	require.NoError(t, err)
	claimed, err := is.statusOrClaim(ctx, room, "alice", e.WaitingToken, ref, true) // Exchange's claim
	require.NoError(t, err)
	c, err := is.Complete(ctx, room, "alice", claimed.AdmissionID)
	require.NoError(t, err)
	assert.False(t, c.Repeated)
	one := BatchStats{Calls: 1, Items: 1}
	assert.Equal(t, ScriptBatchStats{Enter: one, Status: one, Exchange: one, Complete: one}, is.Observe().Batches)
	for _, q := range []int{len(rb.enter.queue), len(rb.status.queue), len(rb.complete.queue)} {
		assert.Zero(t, q, "nothing queued")
	}
}
