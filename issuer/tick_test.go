package issuer_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
)

// scriptReplies records the first two reply elements (a tick's admitted and
// expired) of every script call that succeeds while on is set.
type scriptReplies struct {
	on    atomic.Bool
	mu    sync.Mutex
	calls [][2]int64
}

func (h *scriptReplies) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *scriptReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); err == nil && h.on.Load() && (name == "evalsha" || name == "eval") {
			if r, ok := cmd.(*redis.Cmd).Val().([]any); ok && len(r) >= 2 {
				a, _ := r[0].(int64)
				e, _ := r[1].(int64)
				h.mu.Lock()
				h.calls = append(h.calls, [2]int64{a, e})
				h.mu.Unlock()
			}
		}
		return err
	}
}

// tick runs one Tick and returns its result and the (admitted, expired) of
// each script call it made, checking that Redis counted as many calls.
func (h *scriptReplies) tick(t *testing.T, is *issuer.Issuer, rdb *redis.Client, room string) (issuer.TickResult, [][2]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h.mu.Lock()
	h.calls = nil
	h.mu.Unlock()
	before := evalCalls(t, rdb)
	h.on.Store(true)
	res, err := is.Tick(ctx, room)
	h.on.Store(false)
	require.NoError(t, err)
	h.mu.Lock()
	defer h.mu.Unlock()
	require.EqualValues(t, len(h.calls), evalCalls(t, rdb)-before, "script calls Redis counted (INFO commandstats)")
	return res, h.calls
}

// TestTickWorksALargeBatchOffInBoundedCalls: a room with batch 3000 and
// 3100 waiting users is ticked once: the tick admits 3000 (FIFO), in at
// least three script calls of at most 1000 admissions each, so Redis is never
// blocked for the whole batch; the lapsed admissions are then dropped the
// same way, and the totals of TickResult are those of the whole step.
func TestTickWorksALargeBatchOffInBoundedCalls(t *testing.T) {
	const perCall = 1000 // issuer.MaxTickPerCall
	ctx := context.Background()
	is, clk, room, rdb := setup(t, issuer.RoomConfig{Capacity: 100_000, RatePerMinute: 10_000_000,
		SessionDuration: 10 * time.Second, TickBatch: 3000, State: issuer.RoomPaused})
	h := &scriptReplies{}
	rdb.AddHook(h)

	const users = 3100
	enterAll(t, is, room, "u", users, 8)
	// The first 3000 by arrival (any order of enters) are the ones admitted.
	var waitingBefore []string
	require.NoError(t, rdb.ZRange(ctx, issuer.RoomKeys(room)[1], 3000, -1).ScanSlice(&waitingBefore))
	require.Len(t, waitingBefore, users-3000)
	_, err := is.SetState(ctx, room, issuer.RoomOpen)
	require.NoError(t, err)
	// Load the script (an unknown room), so that no NOSCRIPT round is counted below.
	_, err = is.Tick(ctx, room+"-unknown")
	require.ErrorIs(t, err, flashgate.ErrUnknownRoom)

	res, calls := h.tick(t, is, rdb, room)
	assert.Equal(t, 3000, res.Admitted, "one tick admits the whole batch")
	assert.Equal(t, 0, res.Expired)
	assert.Equal(t, 3000, res.Active)
	assert.Equal(t, users-3000, res.Waiting)
	assert.Equal(t, time.Second, res.Tick)
	assert.GreaterOrEqual(t, len(calls), 3, "calls %v", calls)
	var sum int64
	for _, c := range calls {
		assert.LessOrEqual(t, c[0], int64(perCall), "admitted by one call; calls %v", calls)
		sum += c[0]
	}
	assert.EqualValues(t, 3000, sum)
	var waitingAfter []string
	require.NoError(t, rdb.ZRange(ctx, issuer.RoomKeys(room)[1], 0, -1).ScanSlice(&waitingAfter))
	assert.Equal(t, waitingBefore, waitingAfter, "FIFO: the last 100 by arrival still wait")

	// All 3000 lapse: the next tick drops them (at most 1000 per call) and
	// admits the 100 still waiting.
	clk.Advance(10 * time.Second)
	res, calls = h.tick(t, is, rdb, room)
	assert.Equal(t, 3000, res.Expired)
	assert.Equal(t, users-3000, res.Admitted)
	assert.Equal(t, users-3000, res.Active)
	assert.Equal(t, 0, res.Waiting)
	assert.GreaterOrEqual(t, len(calls), 3, "calls %v", calls)
	for _, c := range calls {
		assert.LessOrEqual(t, c[1], int64(perCall), "expired by one call; calls %v", calls)
	}

	// Capacity still binds across the calls of one tick.
	room2 := room + "-cap"
	_, err = is.SetRoom(ctx, room2, issuer.RoomConfig{Capacity: 2500, RatePerMinute: 10_000_000,
		TickBatch: 3000, State: issuer.RoomPaused})
	require.NoError(t, err)
	enterAll(t, is, room2, "u", users, 8)
	_, err = is.SetState(ctx, room2, issuer.RoomOpen)
	require.NoError(t, err)
	res, calls = h.tick(t, is, rdb, room2)
	assert.Equal(t, 2500, res.Admitted, "capacity 2500")
	assert.Equal(t, 2500, res.Active)
	assert.Len(t, calls, 3, "1000 + 1000 + 500, and the short call ends the tick: %v", calls)
}

// TestTickDropsOldEndedRecordsInBoundedCalls: ended records (completions,
// revocations, expiries, leaves) past their keeping time are dropped oldest
// first, at most ten times the per-call bound per script call, however many
// have piled up (a mass of leaves is not bounded by the batch); newer ones
// stay.
func TestTickDropsOldEndedRecordsInBoundedCalls(t *testing.T) {
	const perCall = 1000 // issuer.MaxTickPerCall
	ctx := context.Background()
	is, clk, room, rdb := setup(t, issuer.RoomConfig{Capacity: 10})
	ended := issuer.RoomKeys(room)[9]
	old := clk.Now().Add(-time.Hour).UnixMilli()
	const piled = 25_000
	for i := 0; i < piled; i += 5000 {
		zs := make([]redis.Z, 0, 5000)
		for j := i; j < i+5000; j++ {
			zs = append(zs, redis.Z{Score: float64(old + int64(j)), Member: "L:" + strconv.Itoa(j+1)})
		}
		require.NoError(t, rdb.ZAdd(ctx, ended, zs...).Err())
	}
	fresh := clk.Now().Add(-time.Minute).UnixMilli()
	require.NoError(t, rdb.ZAdd(ctx, ended, redis.Z{Score: float64(fresh), Member: "C:99999"}).Err())

	left := int64(piled + 1)
	for left > 1 {
		_, err := is.Tick(ctx, room)
		require.NoError(t, err)
		n, err := rdb.ZCard(ctx, ended).Result()
		require.NoError(t, err)
		assert.Equal(t, max(left-10*perCall, 1), n, "one call drops at most %d", 10*perCall)
		left = n
	}
	oldest, err := rdb.ZRangeWithScores(ctx, ended, 0, 0).Result()
	require.NoError(t, err)
	assert.Equal(t, []redis.Z{{Score: float64(fresh), Member: "C:99999"}}, oldest, "records within their keeping time stay")
}
