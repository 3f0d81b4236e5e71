package issuer

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
)

// batchIssuer returns an Issuer on a private redis-server (so INFO
// commandstats counts only this test's calls) and a fresh room with cfg.
func batchIssuer(t *testing.T, batch int, cfg RoomConfig) (*Issuer, *redis.Client, string) {
	t.Helper()
	rdb := redistest.Start(t).Client(t)
	is, err := New(Config{Redis: rdb, WaitingSecret: []byte(strings.Repeat("s", 32)), EnterBatch: batch})
	require.NoError(t, err)
	room := redistest.Room("batch")
	_, err = is.SetRoom(context.Background(), room, cfg)
	require.NoError(t, err)
	return is, rdb, room
}

// One script call for several users behaves as if each had entered alone,
// in argument order: FIFO by position in the batch, one place per user even
// when a user is in the batch twice, and a later batch sees the earlier one.
func TestEnterBatchIsSequential(t *testing.T) {
	ctx := context.Background()
	is, rdb, room := batchIssuer(t, 0, RoomConfig{State: RoomPaused})

	got, err := is.enterUsers(ctx, room, "a", "b", "a", "c")
	require.NoError(t, err)
	require.Len(t, got, 4)
	type pos struct{ seq, pos, total int64 }
	var ps []pos
	for _, e := range got {
		assert.Equal(t, flashgate.StateWaiting, e.state)
		ps = append(ps, pos{e.seq, e.pos, e.total})
	}
	assert.Equal(t, []pos{{1, 1, 1}, {2, 2, 2}, {1, 1, 2}, {3, 3, 3}}, ps)

	got, err = is.enterUsers(ctx, room, "c", "d")
	require.NoError(t, err)
	assert.Equal(t, pos{3, 3, 3}, pos{got[0].seq, got[0].pos, got[0].total})
	assert.Equal(t, pos{4, 4, 4}, pos{got[1].seq, got[1].pos, got[1].total})

	members, err := rdb.ZRangeWithScores(ctx, roomKeys(room)[1], 0, -1).Result()
	require.NoError(t, err)
	var line []string
	for _, m := range members {
		line = append(line, m.Member.(string)+"="+strconv.FormatFloat(m.Score, 'f', -1, 64))
	}
	assert.Equal(t, []string{"a=1", "b=2", "c=3", "d=4"}, line)
	seq, err := rdb.Get(ctx, roomKeys(room)[4]).Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(4), seq, "the arrival counter counts entries ever created")
}

// Fast track inside a batch: users are admitted while capacity lasts, the
// rest queue, and a user admitted earlier in the same batch gets its
// admission back instead of a second one.
func TestEnterBatchFastTrack(t *testing.T) {
	ctx := context.Background()
	is, rdb, room := batchIssuer(t, 0, RoomConfig{Capacity: 2, RatePerMinute: 6000})

	got, err := is.enterUsers(ctx, room, "a", "b", "c", "a", "d")
	require.NoError(t, err)
	states := make([]flashgate.State, len(got))
	for i, e := range got {
		states[i] = e.state
	}
	assert.Equal(t, []flashgate.State{flashgate.StateActive, flashgate.StateActive, flashgate.StateWaiting, flashgate.StateActive, flashgate.StateWaiting}, states)
	assert.Equal(t, got[0].jti, got[3].jti, "a's second enter returns its admission")
	assert.NotEqual(t, got[0].jti, got[1].jti)
	assert.Equal(t, []int64{1, 2}, []int64{got[2].pos, got[4].pos})
	live, err := rdb.ZCard(ctx, roomKeys(room)[2]).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(2), live)
	idx, err := rdb.HGet(ctx, roomKeys(room)[3], "a").Result()
	require.NoError(t, err)
	assert.Equal(t, got[0].jti, idx)
}

// evalCalls counts the script calls Redis has served (EVALSHA and EVAL).
func evalCalls(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	return cmdCalls(t, rdb, "evalsha") + cmdCalls(t, rdb, "eval")
}

// cmdCalls counts the calls of command cmd (lower case) Redis has served,
// scripts' included (INFO commandstats).
func cmdCalls(t *testing.T, rdb *redis.Client, cmd string) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			v, _, _ = strings.Cut(v, ",")
			c, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return c
		}
	}
	return 0
}

// Concurrent enters for one room share script calls (and each still gets
// exactly one place); with EnterBatch 1 every enter is its own call.
func TestEnterCoalescesConcurrentCalls(t *testing.T) {
	const users = 300
	for _, batch := range []int{0, 1} {
		t.Run("EnterBatch="+strconv.Itoa(batch), func(t *testing.T) {
			ctx := context.Background()
			is, rdb, room := batchIssuer(t, batch, RoomConfig{State: RoomPaused})
			// Load the script first: concurrent first calls would each add a
			// NOSCRIPT EVALSHA and its EVAL to the count.
			_, err := is.Enter(ctx, room, "warm-up")
			require.NoError(t, err)
			require.NoError(t, rdb.ConfigResetStat(ctx).Err())
			var wg sync.WaitGroup
			start := make(chan struct{})
			seqs := make([]int64, users)
			for i := range users {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					e, err := is.Enter(ctx, room, "u"+strconv.Itoa(i))
					if assert.NoError(t, err) {
						seqs[i] = e.Arrival
					}
				}()
			}
			close(start)
			wg.Wait()
			calls := evalCalls(t, rdb)
			st := is.Observe().Batches.Enter
			assert.Equal(t, calls+1, st.Calls, "Observe().Batches.Enter.Calls (with the warm-up)")
			assert.Equal(t, int64(users+1), st.Items, "Observe().Batches.Enter.Items: users")
			if batch == 1 {
				assert.Equal(t, int64(users), calls)
			} else {
				assert.Less(t, calls, int64(users), "concurrent enters were not coalesced")
				assert.GreaterOrEqual(t, calls, int64(users/DefaultEnterBatch))
			}
			seen := map[int64]bool{}
			for _, s := range seqs {
				assert.False(t, seen[s], "arrival %d handed out twice", s)
				seen[s] = true
			}
			n, err := rdb.ZCard(ctx, roomKeys(room)[1]).Result()
			require.NoError(t, err)
			assert.Equal(t, int64(users+1), n)
		})
	}
}

// An Enter whose context has ended before its batch is sent is answered
// flashgate.ErrUnavailable and never reaches Redis.
func TestEnterCancelledBeforeSend(t *testing.T) {
	is, rdb, room := batchIssuer(t, 0, RoomConfig{State: RoomPaused})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := is.Enter(ctx, room, "late")
	require.ErrorIs(t, err, flashgate.ErrUnavailable)
	require.ErrorIs(t, err, context.Canceled)
	_, err = rdb.ZScore(context.Background(), roomKeys(room)[1], "late").Result()
	assert.True(t, errors.Is(err, redis.Nil), "a cancelled enter must not take a place: %v", err)
}

func TestEnterBatchConfig(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	for _, n := range []int{-1, MaxEnterBatch + 1} {
		_, err := New(Config{Redis: rdb, EnterBatch: n})
		assert.ErrorIs(t, err, flashgate.ErrInvalidInput, "EnterBatch %d", n)
	}
	is, err := New(Config{Redis: rdb})
	require.NoError(t, err)
	assert.Equal(t, DefaultScriptBatch, is.cfg.ScriptBatch)
}

// A batch of MaxEnterBatch users fits one script call.
func TestEnterMaxBatch(t *testing.T) {
	is, rdb, room := batchIssuer(t, MaxEnterBatch, RoomConfig{State: RoomPaused})
	users := make([]any, MaxEnterBatch)
	for i := range users {
		users[i] = "u" + strconv.Itoa(i)
	}
	got, err := is.enterUsers(context.Background(), room, users...)
	require.NoError(t, err)
	require.Len(t, got, MaxEnterBatch)
	assert.Equal(t, int64(MaxEnterBatch), got[MaxEnterBatch-1].pos)
	n, err := rdb.ZCard(context.Background(), roomKeys(room)[1]).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(MaxEnterBatch), n)
}
