package issuer_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
)

// admittedOrder returns the arrival numbers of the room's admissions in
// admission order, read from the user index (users hash: user → jti, whose
// admission id carries both numbers), and user → arrival number.
func admittedOrder(t *testing.T, rdb redis.UniversalClient, room string) (seqs []int64, byUser map[string]int64) {
	t.Helper()
	m, err := rdb.HGetAll(context.Background(), issuer.RoomKeys(room)[3]).Result()
	require.NoError(t, err)
	type adm struct{ seq, no int64 }
	var all []adm
	byUser = map[string]int64{}
	for user, jti := range m {
		id, ok := flashgate.ParseAdmissionID(jti)
		require.True(t, ok, jti)
		all = append(all, adm{id.Arrival, id.Number})
		byUser[user] = id.Arrival
	}
	sort.Slice(all, func(i, j int) bool { return all[i].no < all[j].no })
	for _, a := range all {
		seqs = append(seqs, a.seq)
	}
	return seqs, byUser
}

func lotteryOf(t *testing.T, is *issuer.Issuer, room string) (*issuer.Lottery, string) {
	t.Helper()
	st, err := is.Stats(context.Background(), room)
	require.NoError(t, err)
	require.NotNil(t, st.Lottery)
	return st.Lottery, st.Epoch
}

// TestLotteryPreQueueDrawnAtOpening walks one shuffle room through its
// opening: before it, entries are in the pre-queue (no place, no estimate),
// the seed is secret and only its commitment shown; the first script after
// the opening fixes the cutoff (a later arrival is behind everyone who came
// before); the tick places the pre-queue, then admits in the order the
// published seed reproduces; later arrivals follow in arrival order.
func TestLotteryPreQueueDrawnAtOpening(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	clk := newClock()
	is := newIssuer(t, rdb, clk)
	room := redistest.Room("lottery")
	opens := clk.Now().Add(time.Minute)
	_, err := is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1, RatePerMinute: 6000, Opens: opens,
		PreQueue: issuer.PreQueueShuffle})
	require.NoError(t, err)
	cfg, err := is.Room(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, issuer.PreQueueShuffle, cfg.PreQueue)

	const pre = 40
	toks := map[string]string{}
	for i := 1; i <= pre; i++ {
		e, err := is.Enter(ctx, room, "p"+strconv.Itoa(i))
		require.NoError(t, err)
		assert.True(t, e.PreQueue, "entered before the opening: in the pre-queue")
		assert.Zero(t, e.Position)
		assert.Zero(t, e.Ahead)
		assert.EqualValues(t, i, e.TotalWaiting)
		assert.Equal(t, time.Duration(-1), e.EstimatedWait)
		toks[e.User] = e.WaitingToken
	}
	again, err := is.Enter(ctx, room, "p1")
	require.NoError(t, err)
	assert.True(t, again.PreQueue, "a refresh in the pre-queue")
	assert.Zero(t, again.Position)
	st, err := is.Status(ctx, room, "p7", toks["p7"])
	require.NoError(t, err)
	assert.True(t, st.PreQueue)
	assert.Zero(t, st.Position)

	l, _ := lotteryOf(t, is, room)
	assert.False(t, l.Drawn)
	assert.Empty(t, l.Seed, "the seed is secret before the draw")
	require.Len(t, l.Commitment, 40)
	seed, err := rdb.HGet(ctx, issuer.RoomKeys(room)[0], "lottery_seed").Result()
	require.NoError(t, err)
	require.Equal(t, issuer.LotteryPending, seed, "no secret in the store before the draw (issue 36)")

	// The opening. The first script to see it (this enter) records the cutoff
	// before numbering the newcomer, who queues behind the whole pre-queue.
	clk.Set(opens)
	late, err := is.Enter(ctx, room, "late1")
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateWaiting, late.State, "no fast track past an undrawn pre-queue")
	assert.False(t, late.PreQueue)
	assert.EqualValues(t, pre+1, late.Arrival)
	assert.EqualValues(t, pre+1, late.Position)
	commitment := l.Commitment
	l, epoch := lotteryOf(t, is, room)
	assert.True(t, l.Drawn)
	assert.Empty(t, l.Seed, "the issuer reveals the derived seed at its next tick, never the script")
	assert.Equal(t, commitment, l.Commitment, "the same commitment across the draw")
	assert.EqualValues(t, pre, l.Cutoff)
	assert.Equal(t, issuer.LotteryBits(pre), l.Bits)
	assert.Equal(t, opens, l.DrawnAt)
	assert.True(t, l.PlacedAt.IsZero(), "not placed before a tick")

	// Until the tick places them, their places are still not shown.
	st, err = is.Status(ctx, room, "p7", toks["p7"])
	require.NoError(t, err)
	assert.True(t, st.PreQueue)

	res, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, pre, res.Placed)
	assert.Equal(t, 1, res.Admitted, "capacity 1")
	late2, err := is.Enter(ctx, room, "late2")
	require.NoError(t, err)
	assert.EqualValues(t, pre+1, late2.Position, "39 drawn + late1 ahead")

	l, epoch = lotteryOf(t, is, room)
	require.Len(t, l.Seed, 32, "revealed by the tick")
	assert.Equal(t, commitment, l.Commitment)
	assert.Equal(t, opens, l.PlacedAt)
	assert.EqualValues(t, pre, l.Placed)
	want := make([]int64, pre)
	for i := range want {
		want[i] = int64(i + 1)
	}
	want = issuer.LotteryOrder(*l, epoch, want)
	require.NotEqual(t, want[:10], []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, "shuffled")

	// Exact places after the draw: the lottery's order.
	place := map[int64]int64{}
	for i, s := range want[1:] {
		place[s] = int64(i + 1)
	}
	for i := 1; i <= pre; i++ {
		u := "p" + strconv.Itoa(i)
		st, err := is.Status(ctx, room, u, toks[u])
		require.NoError(t, err)
		assert.False(t, st.PreQueue, u)
		if st.State == flashgate.StateWaiting {
			assert.Equal(t, place[int64(i)], st.Position, u)
			assert.GreaterOrEqual(t, st.EstimatedWait, time.Duration(0))
		}
	}

	// Admit everyone; the order is the lottery's, then arrival order.
	_, _, err = is.UpdateRoom(ctx, room, issuer.RoomPatch{Capacity: ptr(1000)})
	require.NoError(t, err)
	clk.Advance(time.Second)
	_, err = is.Tick(ctx, room)
	require.NoError(t, err)
	got, _ := admittedOrder(t, rdb, room)
	assert.Equal(t, append(want, pre+1, pre+2), got)
}

// TestLotteryDistribution: over many rooms of k pre-queue entries each, the
// rank at which each arrival is admitted is uniform (chi-square over the k×k
// rank matrix, and over who is admitted first, at significance 0.001). The
// rooms' seeds and epochs are fixed (room i: seed i, epoch i) so that the
// test is deterministic; the same measurement of FIFO rooms fails it.
func TestLotteryDistribution(t *testing.T) {
	const k = 5
	// Critical chi-square values at 0.001: (k−1)² = 16 and k−1 = 4 degrees of freedom.
	const crit16, crit4 = 39.252, 18.467
	rdb := redistest.Start(t).Client(t)
	clk := newClock()
	is := newIssuer(t, rdb, clk)

	measure := func(prefix string, mode issuer.PreQueue, rooms int) (matrix, first float64) {
		var ranks [k][k]int // arrival → admission rank
		ctx := context.Background()
		for r := range rooms {
			room := redistest.Room(prefix)
			opens := clk.Now().Add(time.Second)
			_, err := is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: k, RatePerMinute: 60000, Opens: opens, PreQueue: mode})
			require.NoError(t, err)
			if mode == issuer.PreQueueShuffle {
				require.NoError(t, rdb.HSet(ctx, issuer.RoomKeys(room)[0], "lottery_seed", fmt.Sprintf("%032x", r+1),
					"epoch", strconv.FormatInt(int64(r+1), 36)).Err())
			}
			for i := 1; i <= k; i++ {
				_, err := is.Enter(ctx, room, "u"+strconv.Itoa(i))
				require.NoError(t, err)
			}
			clk.Set(opens)
			res, err := is.Tick(ctx, room)
			require.NoError(t, err)
			require.Equal(t, k, res.Admitted)
			order, _ := admittedOrder(t, rdb, room)
			require.Len(t, order, k)
			for rank, seq := range order {
				ranks[seq-1][rank]++
			}
		}
		exp := float64(rooms) / k
		for a := range k {
			for r := range k {
				d := float64(ranks[a][r]) - exp
				matrix += d * d / exp
			}
			d := float64(ranks[a][0]) - exp
			first += d * d / exp
		}
		t.Logf("%s: %d rooms, rank matrix %v, chi-square %.1f (16 df), first admitted %.1f (4 df)", mode, rooms, ranks, matrix, first)
		return matrix, first
	}
	matrix, first := measure("dist", issuer.PreQueueShuffle, 1500)
	assert.Less(t, matrix, crit16, "ranks uniform")
	assert.Less(t, first, crit4, "first admitted uniform")
	matrix, first = measure("fifo", issuer.PreQueueFIFO, 100)
	assert.Greater(t, matrix, crit16, "FIFO fails the test")
	assert.Greater(t, first, crit4)
}

// TestLotteryNobodyLostOrDuplicated: 2,000 buyers enter before the opening
// and 500 after it, concurrently; every waiting token finds its entry before
// and after the draw; the draw places all 2,000 (in several bounded tick
// calls); everyone is admitted exactly once, the pre-queue in the order the
// seed reproduces, then the later arrivals in arrival order; each admission
// id carries the buyer's arrival number.
func TestLotteryNobodyLostOrDuplicated(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	clk := newClock()
	is := newIssuer(t, rdb, clk)
	room := redistest.Room("lottery")
	opens := clk.Now().Add(time.Minute)
	_, err := is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1, RatePerMinute: 10_000_000, TickBatch: 10_000,
		Opens: opens, PreQueue: issuer.PreQueueShuffle})
	require.NoError(t, err)

	const pre, later = 2000, 500
	var mu sync.Mutex
	entries := map[string]*issuer.Entry{}
	enter := func(prefix string, n int, check func(*issuer.Entry)) {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 64)
		for i := range n {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				e, err := is.Enter(ctx, room, prefix+strconv.Itoa(i))
				if assert.NoError(t, err) {
					check(e)
					mu.Lock()
					entries[e.User] = e
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	enter("p", pre, func(e *issuer.Entry) { assert.True(t, e.PreQueue) })
	status := func(user string) *issuer.Entry {
		st, err := is.Status(ctx, room, user, entries[user].WaitingToken)
		require.NoError(t, err)
		require.Equal(t, flashgate.StateWaiting, st.State, user)
		require.Equal(t, entries[user].Arrival, st.Arrival)
		return st
	}
	for u := range entries {
		assert.True(t, status(u).PreQueue, "before the draw %s finds its entry, with no place", u)
	}

	clk.Set(opens)
	enter("l", later, func(e *issuer.Entry) {
		assert.False(t, e.PreQueue)
		assert.Greater(t, e.Arrival, int64(pre))
		assert.Greater(t, e.Position, int64(pre), "behind the whole pre-queue")
	})
	require.Len(t, entries, pre+later)

	// One tick places everyone (MaxTickPerCall per call) and admits one.
	res, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, pre, res.Placed)
	assert.Equal(t, 1, res.Admitted)
	l, epoch := lotteryOf(t, is, room)
	assert.EqualValues(t, pre, l.Cutoff)
	assert.EqualValues(t, pre, l.Placed)

	// After the draw every waiting token finds its entry at a distinct exact place.
	places := map[int64]string{}
	for u := range entries {
		st, err := is.Status(ctx, room, u, entries[u].WaitingToken)
		require.NoError(t, err)
		if st.State == flashgate.StateActive {
			continue
		}
		require.Equal(t, flashgate.StateWaiting, st.State, u)
		assert.False(t, st.PreQueue)
		require.NotContains(t, places, st.Position, "two entries at one place")
		places[st.Position] = u
	}
	assert.Len(t, places, pre+later-1)

	_, _, err = is.UpdateRoom(ctx, room, issuer.RoomPatch{Capacity: ptr(10_000)})
	require.NoError(t, err)
	clk.Advance(time.Second)
	res, err = is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, pre+later-1, res.Admitted)
	assert.Zero(t, res.Waiting)

	got, byUser := admittedOrder(t, rdb, room)
	require.Len(t, got, pre+later, "everyone admitted")
	require.Len(t, byUser, pre+later)
	for u, e := range entries {
		assert.Equal(t, e.Arrival, byUser[u], "%s: the admission id carries the arrival number", u)
	}
	var preSeqs, laterSeqs []int64
	for _, e := range entries {
		if e.Arrival <= pre {
			preSeqs = append(preSeqs, e.Arrival)
		} else {
			laterSeqs = append(laterSeqs, e.Arrival)
		}
	}
	slices.Sort(laterSeqs)
	assert.Equal(t, append(issuer.LotteryOrder(*l, epoch, preSeqs), laterSeqs...), got,
		"the pre-queue in the seed's order, then arrival order")
	seen := map[int64]bool{}
	for _, s := range got {
		require.False(t, seen[s], "arrival %d admitted twice", s)
		seen[s] = true
	}
}

// TestLotteryDrawnOnce: the draw is fixed once. Pausing and reopening,
// moving the opening, saving the config again or switching to fifo and back
// neither reshuffle nor change the seed; a room switched to shuffle after
// it has opened gets an empty draw (its line stays in arrival order).
func TestLotteryDrawnOnce(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	clk := newClock()
	is := newIssuer(t, rdb, clk)
	room := redistest.Room("once")
	_, err := is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1, State: issuer.RoomPaused, PreQueue: issuer.PreQueueShuffle})
	require.NoError(t, err)
	for i := range 30 {
		_, err := is.Enter(ctx, room, "u"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	waiting := func() []string {
		w, err := rdb.ZRange(ctx, issuer.RoomKeys(room)[1], 0, -1).Result()
		require.NoError(t, err)
		return w
	}
	arrival := slices.Clone(waiting())
	_, err = is.SetState(ctx, room, issuer.RoomOpen) // opened by the admin: the draw
	require.NoError(t, err)
	_, err = is.Tick(ctx, room)
	require.NoError(t, err)
	drawn := waiting()
	require.Len(t, drawn, 29)
	assert.NotEqual(t, arrival[1:], drawn)
	l0, _ := lotteryOf(t, is, room)

	clk.Advance(time.Second)
	_, err = is.SetState(ctx, room, issuer.RoomPaused)
	require.NoError(t, err)
	for i := 30; i < 35; i++ { // arrivals while paused join behind the drawn ones
		_, err := is.Enter(ctx, room, "u"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	_, err = is.SetState(ctx, room, issuer.RoomOpen)
	require.NoError(t, err)
	_, _, err = is.UpdateRoom(ctx, room, issuer.RoomPatch{Opens: ptr(clk.Now().Add(time.Hour))})
	require.NoError(t, err)
	_, _, err = is.UpdateRoom(ctx, room, issuer.RoomPatch{PreQueue: ptr(issuer.PreQueueFIFO)})
	require.NoError(t, err)
	_, _, err = is.UpdateRoom(ctx, room, issuer.RoomPatch{PreQueue: ptr(issuer.PreQueueShuffle), Opens: ptr(time.Time{})})
	require.NoError(t, err)
	_, err = is.Tick(ctx, room)
	require.NoError(t, err)
	l1, _ := lotteryOf(t, is, room)
	assert.Equal(t, *l0, *l1, "the same draw, the same seed")
	w := waiting()
	require.Len(t, w, 34, "capacity 1 is held: nobody more admitted")
	assert.Equal(t, drawn, w[:29], "not reshuffled")
	assert.Equal(t, []string{"u30", "u31", "u32", "u33", "u34"}, w[29:], "later arrivals in arrival order")

	// A FIFO room that has opened and is switched to shuffle: no pre-queue.
	fifo := redistest.Room("switch")
	_, err = is.SetRoom(ctx, fifo, issuer.RoomConfig{Capacity: 1})
	require.NoError(t, err)
	for i := range 10 {
		_, err := is.Enter(ctx, fifo, "u"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	_, _, err = is.UpdateRoom(ctx, fifo, issuer.RoomPatch{PreQueue: ptr(issuer.PreQueueShuffle)})
	require.NoError(t, err)
	l, _ := lotteryOf(t, is, fifo)
	assert.True(t, l.Drawn)
	assert.Zero(t, l.Cutoff, "an empty draw")
	assert.False(t, l.PlacedAt.IsZero())
	clk.Advance(10 * time.Minute)
	_, _, err = is.UpdateRoom(ctx, fifo, issuer.RoomPatch{Capacity: ptr(100)})
	require.NoError(t, err)
	_, err = is.Tick(ctx, fifo)
	require.NoError(t, err)
	got, _ := admittedOrder(t, rdb, fifo)
	assert.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, got, "arrival order")

	// A new room (open by default) nobody has entered may be switched: its draw waits for the opening.
	fresh := redistest.Room("fresh")
	_, err = is.SetRoom(ctx, fresh, issuer.RoomConfig{})
	require.NoError(t, err)
	_, err = is.Stats(ctx, fresh)
	require.NoError(t, err)
	_, _, err = is.UpdateRoom(ctx, fresh, issuer.RoomPatch{PreQueue: ptr(issuer.PreQueueShuffle), Opens: ptr(clk.Now().Add(time.Hour))})
	require.NoError(t, err)
	l, _ = lotteryOf(t, is, fresh)
	assert.False(t, l.Drawn, "not drawn before the opening")
}

// TestLotteryLeaveAndBanBeforePlacing: entries that leave or are banned
// between the cutoff and the placing are not placed, not admitted, and the
// rest are unaffected; status, leave and ban find drawn entries by their
// arrival number (seq_of_score).
func TestLotteryLeaveAndBanBeforePlacing(t *testing.T) {
	ctx := context.Background()
	is, clk, room, rdb := setup(t, issuer.RoomConfig{Capacity: 100, Opens: newClock().Now().Add(time.Minute),
		PreQueue: issuer.PreQueueShuffle})
	toks := map[string]string{}
	for i := range 10 {
		e, err := is.Enter(ctx, room, "u"+strconv.Itoa(i))
		require.NoError(t, err)
		toks[e.User] = e.WaitingToken
	}
	require.NoError(t, is.Leave(ctx, room, "u0", toks["u0"]), "leave in the pre-queue")
	clk.Advance(time.Minute)
	_, err := is.Stats(ctx, room) // the draw
	require.NoError(t, err)
	require.NoError(t, is.Leave(ctx, room, "u1", toks["u1"]), "leave after the draw, before placing")
	_, err = is.Ban(ctx, room, "u2", time.Hour, "bot")
	require.NoError(t, err)
	// Place without admitting (paused), then leave and ban drawn entries.
	_, err = is.SetState(ctx, room, issuer.RoomPaused)
	require.NoError(t, err)
	res, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 7, res.Placed)
	assert.Zero(t, res.Admitted)
	require.NoError(t, is.Leave(ctx, room, "u3", toks["u3"]), "leave a placed entry")
	b, err := is.Ban(ctx, room, "u4", time.Hour, "bot")
	require.NoError(t, err)
	assert.True(t, b.RemovedWaiting)
	st, err := is.Status(ctx, room, "u4", toks["u4"])
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateRevoked, st.State, "the ban's ended record has the right arrival number")
	st, err = is.Status(ctx, room, "u3", toks["u3"])
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateNotFound, st.State)
	n, err := rdb.ZCard(ctx, issuer.RoomKeys(room)[1]).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 5, n)
	_, err = is.SetState(ctx, room, issuer.RoomOpen)
	require.NoError(t, err)
	_, err = is.Tick(ctx, room)
	require.NoError(t, err)
	_, byUser := admittedOrder(t, rdb, room)
	assert.Len(t, byUser, 5)
	for _, u := range []string{"u5", "u6", "u7", "u8", "u9"} {
		st, err := is.Status(ctx, room, u, toks[u])
		require.NoError(t, err)
		assert.Equal(t, flashgate.StateActive, st.State, u)
	}
}

// TestLotterySnapshot: with the status snapshot on, pre-queue tokens are
// answered exactly (before and after the draw) and later arrivals far back
// get a place interpolated behind the drawn entries.
func TestLotterySnapshot(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	clk := newClock()
	is := newIssuer(t, rdb, clk, func(c *issuer.Config) { c.StatusSnapshot = 2 * time.Second })
	room := redistest.Room("snap")
	opens := clk.Now().Add(time.Minute)
	_, err := is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1, RatePerMinute: 60, Opens: opens, PreQueue: issuer.PreQueueShuffle})
	require.NoError(t, err)
	toks := map[int]string{}
	for i := 1; i <= 300; i++ {
		e, err := is.Enter(ctx, room, "u"+strconv.Itoa(i))
		require.NoError(t, err)
		toks[i] = e.WaitingToken
	}
	st, err := is.Status(ctx, room, "u250", toks[250])
	require.NoError(t, err)
	assert.True(t, st.PreQueue)
	assert.False(t, st.PositionEstimated)
	clk.Set(opens)
	for i := 301; i <= 600; i++ {
		e, err := is.Enter(ctx, room, "u"+strconv.Itoa(i))
		require.NoError(t, err)
		toks[i] = e.WaitingToken
	}
	res, err := is.Tick(ctx, room)
	require.NoError(t, err)
	require.Equal(t, 300, res.Placed)
	require.Equal(t, 1, res.Admitted)
	is = newIssuer(t, rdb, clk, func(c *issuer.Config) { c.StatusSnapshot = 2 * time.Second }) // a fresh snapshot
	for _, i := range []int{2, 150, 299} {
		st, err := is.Status(ctx, room, "u"+strconv.Itoa(i), toks[i])
		require.NoError(t, err)
		assert.False(t, st.PositionEstimated, "a drawn entry is answered exactly")
	}
	for _, i := range []int{450, 600} {
		st, err := is.Status(ctx, room, "u"+strconv.Itoa(i), toks[i])
		require.NoError(t, err)
		if assert.True(t, st.PositionEstimated, "u%d", i) {
			assert.EqualValues(t, i-1, st.Position, "behind the 299 drawn entries still waiting")
		}
	}
}

// TestLotteryAutoCreatedRoomsOwnSeeds: rooms created on first enter from a
// shuffle default policy each get a fresh seed, so a seed shown after one
// room's draw predicts no other's.
func TestLotteryAutoCreatedRoomsOwnSeeds(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	is := newIssuer(t, rdb, newClock(), func(c *issuer.Config) {
		c.DefaultRoom = &issuer.RoomConfig{State: issuer.RoomPaused, PreQueue: issuer.PreQueueShuffle}
	})
	seeds := map[string]bool{}
	for i := range 3 {
		room := redistest.Room("auto" + strconv.Itoa(i))
		e, err := is.Enter(ctx, room, "alice")
		require.NoError(t, err)
		assert.True(t, e.Created)
		assert.True(t, e.PreQueue)
		m, err := rdb.HGetAll(ctx, issuer.RoomKeys(room)[0]).Result()
		require.NoError(t, err)
		assert.Equal(t, "shuffle", m["prequeue"])
		require.Equal(t, issuer.LotteryPending, m["lottery_seed"], "no secret in the store")
		v, err := is.RoomLottery(ctx, room)
		require.NoError(t, err)
		seeds[v.Commitment] = true
		assert.Equal(t, v.Commitment, e.LotteryCommitment, "public from the first entry")
		assert.Empty(t, e.Receipt, "a Signer that does not sign receipts: none")
		evs, err := rdb.XRange(ctx, issuer.RoomKeys(room)[16], "-", "+").Result()
		require.NoError(t, err)
		journaled := false
		for _, ev := range evs {
			journaled = journaled || ev.Values["action"] == issuer.ActionLotteryCommit &&
				strings.Contains(ev.Values["detail"].(string), v.Commitment)
		}
		assert.True(t, journaled, "the auto room's commitment is journaled")
		cfg, err := is.Room(ctx, room)
		require.NoError(t, err)
		assert.Equal(t, issuer.PreQueueShuffle, cfg.PreQueue)
	}
	assert.Len(t, seeds, 3)
}

// TestLotteryUnderConcurrency: two issuers, buyers entering before and
// after the opening, ticks and status polls from several goroutines, a
// consumer completing admissions: nobody admitted twice, live never above
// capacity, the drawn entries admitted in the seed's order before every
// later arrival, and the later arrivals in arrival order.
func TestLotteryUnderConcurrency(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rdb := redistest.Start(t).Client(t)
	clk := newClock()
	replicas := []*issuer.Issuer{newIssuer(t, rdb, clk), newIssuer(t, rdb, clk)}
	room := redistest.Room("surge")
	const capacity, pre, later = 20, 400, 300
	opens := clk.Now().Add(2 * time.Second)
	_, err := replicas[0].SetRoom(ctx, room, issuer.RoomConfig{Capacity: capacity, RatePerMinute: 3000,
		SessionDuration: 5 * time.Second, Tick: 200 * time.Millisecond, TickBatch: 50, Opens: opens,
		PreQueue: issuer.PreQueueShuffle})
	require.NoError(t, err)

	var tokens sync.Map
	var wg sync.WaitGroup
	enter := func(prefix string, n int, spacing time.Duration) {
		sem := make(chan struct{}, 32)
		for i := range n {
			time.Sleep(spacing)
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				u := prefix + strconv.Itoa(i)
				e, err := replicas[i%2].Enter(ctx, room, u)
				if assert.NoError(t, err) {
					tokens.Store(u, e.WaitingToken)
				}
			}()
		}
	}
	done := make(chan struct{})
	var bg sync.WaitGroup
	loop := func(f func()) {
		bg.Add(1)
		go func() {
			defer bg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				f()
				time.Sleep(time.Millisecond)
			}
		}()
	}
	for _, r := range replicas {
		loop(func() {
			_, err := r.Tick(ctx, room)
			assert.NoError(t, err)
		})
		loop(func() { // status polls of whoever has a token
			tokens.Range(func(k, v any) bool {
				e, err := r.Status(ctx, room, k.(string), v.(string))
				assert.NoError(t, err)
				assert.NotEqual(t, flashgate.StateNotFound, e.State)
				return false
			})
		})
	}
	enter("p", pre, 0)
	wg.Wait()   // every pre-queue enter answered before the clock runs
	go func() { // the clock: the room opens after 2 s of room time (about 40 ms), then runs 50× fast
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
				clk.Advance(100 * time.Millisecond)
			}
		}
	}()
	enter("l", later, 300*time.Microsecond) // about 90 ms: some before the opening, most after

	type adm struct{ seq, no int64 }
	admitted := map[string]adm{}
	completed := map[string]bool{}
	deadline := time.Now().Add(60 * time.Second)
	for {
		m, err := rdb.HGetAll(ctx, issuer.RoomKeys(room)[3]).Result()
		require.NoError(t, err)
		for user, jti := range m {
			id, ok := flashgate.ParseAdmissionID(jti)
			require.True(t, ok)
			if a, ok := admitted[user]; ok {
				require.Equal(t, adm{id.Arrival, id.Number}, a, "%s admitted twice", user)
			}
			admitted[user] = adm{id.Arrival, id.Number}
			if !completed[user] {
				if _, err := replicas[int(id.Number)%2].Complete(ctx, room, user, jti); err == nil {
					completed[user] = true
				}
			}
		}
		if len(admitted) == pre+later || time.Now().After(deadline) {
			break
		}
		time.Sleep(3 * time.Millisecond)
	}
	wg.Wait()
	close(done)
	bg.Wait()
	require.Len(t, admitted, pre+later, "everyone admitted once")

	st, err := replicas[1].Stats(ctx, room)
	require.NoError(t, err)
	assert.LessOrEqual(t, st.PeakActive, int64(capacity), "live never above capacity")
	assert.EqualValues(t, pre+later, st.Admitted)
	l := st.Lottery
	require.NotNil(t, l)
	require.True(t, l.Drawn)
	t.Logf("cutoff %d: %d pre-queue enters and %d of the later ones came before the opening; placed %d",
		l.Cutoff, pre, l.Cutoff-pre, l.Placed)
	assert.GreaterOrEqual(t, l.Cutoff, int64(pre))

	all := make([]adm, 0, len(admitted))
	for _, a := range admitted {
		all = append(all, a)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].no < all[j].no })
	var drawn, rest []int64
	for i, a := range all {
		if a.seq <= l.Cutoff {
			drawn = append(drawn, a.seq)
			require.Len(t, rest, 0, "admission %d: a drawn entry after a later arrival", i)
		} else {
			rest = append(rest, a.seq)
		}
	}
	assert.EqualValues(t, l.Cutoff, len(drawn))
	assert.Equal(t, issuer.LotteryOrder(*l, st.Epoch, drawn), drawn, "the drawn set in the seed's order")
	assert.True(t, slices.IsSorted(rest), "later arrivals in arrival order")
}

// BenchmarkLotteryPlacing measures placing a pre-queue of 100,000 (the
// room opens, one Tick places everyone in calls of MaxTickPerCall): the
// longest script call (SLOWLOG), the script time per placed entry, and the
// memory per waiting user once placed (lottery scores instead of arrival
// numbers) against before. Not a unit test: the numbers depend on the host
// (docs/rooms.md#pre-queue-lottery).
func BenchmarkLotteryPlacing(b *testing.B) {
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		srv := redistest.Start(b)
		rdb := srv.Client(b)
		clk := newClock()
		is := newIssuer(b, rdb, clk)
		room := "sku-1"
		before := usedMemory(b, rdb)
		opens := clk.Now().Add(time.Minute)
		if _, err := is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1, Opens: opens, PreQueue: issuer.PreQueueShuffle}); err != nil {
			b.Fatal(err)
		}
		enterAll(b, is, room, "user-", memUsers, 16)
		waitingMem := usedMemory(b, rdb) - before
		_ = rdb.ConfigSet(ctx, "slowlog-max-len", "1000000").Err()
		_ = rdb.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err()
		_ = rdb.SlowLogReset(ctx).Err()
		clk.Set(opens)
		b.StartTimer()
		res, err := is.Tick(ctx, room)
		b.StopTimer()
		_ = rdb.ConfigSet(ctx, "slowlog-log-slower-than", "10000").Err()
		if err != nil || res.Placed != memUsers {
			b.Fatalf("placed %d of %d: %v", res.Placed, memUsers, err)
		}
		log, err := rdb.SlowLogGet(ctx, -1).Result()
		if err != nil {
			b.Fatal(err)
		}
		var worst, total time.Duration
		calls := 0
		for _, e := range log {
			if name := strings.ToLower(fmt.Sprint(e.Args[0])); name == "evalsha" || name == "eval" {
				calls++
				worst = max(worst, e.Duration)
				total += e.Duration
			}
		}
		b.ReportMetric(float64(calls), "script-calls")
		b.ReportMetric(float64(worst.Microseconds()), "µs/longest-script-call")
		b.ReportMetric(float64(total.Microseconds())/memUsers, "script-µs/placed")
		b.ReportMetric(float64(waitingMem)/memUsers, "bytes/user-before")
		b.ReportMetric(float64(usedMemory(b, rdb)-before)/memUsers, "bytes/user-placed")
	}
}
