package issuer

import (
	"context"
	"errors"
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

// decodeEnter refuses replies of any other shape than lua/enter.lua's.
func TestDecodeEnterMalformed(t *testing.T) {
	figures := []any{int64(1000), int64(4), int64(4), int64(2), int64(1), int64(500), int64(300_000), int64(100),
		int64(1000), int64(0), "open"}
	head := []any{int64(0), int64(600), "open", "ep0ch", figures}
	waiting := []any{int64(1), int64(7), int64(3), int64(3), int64(1500)}
	active := []any{int64(2), int64(8), int64(0), "ep0ch.8.1.1000", int64(2000)}
	cat := func(parts ...[]any) []any {
		var out []any
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	got, err := decodeEnter(cat(head, waiting, active), 2)
	require.NoError(t, err)
	eta := etaFigures{now: 1000, capacity: 4, live: 4, admits: 2, ends: 1, window: 500, session: 300_000, batch: 100,
		tick: 1000, configured: RoomOpen, rate: 600, expiry: 1500}
	assert.Equal(t, scriptEntry{state: flashgate.StateWaiting, seq: 7, pos: 3, total: 3, rate: 600, roomState: RoomOpen, epoch: "ep0ch",
		lane: flashgate.LanePublic, eta: eta, hasETA: true}, got[0])
	assert.Equal(t, scriptEntry{state: flashgate.StateActive, seq: 8, jti: "ep0ch.8.1.1000", at: 2000, rate: 600, roomState: RoomOpen, epoch: "ep0ch"}, got[1])
	pri, err := decodeEnter(cat(head, []any{int64(4), int64(9), int64(1), int64(4), int64(0)}), 1)
	require.NoError(t, err)
	eta.expiry = 0
	assert.Equal(t, scriptEntry{state: flashgate.StateWaiting, seq: 9, pos: 1, total: 4, rate: 600, roomState: RoomOpen, epoch: "ep0ch",
		created: false, lane: flashgate.LanePriority, eta: eta, hasETA: true}, pri[0], "4: waiting in the priority lane")

	for name, r := range map[string][]any{
		"empty":          {},
		"no users":       head,
		"no epoch":       cat(head[:3], waiting, waiting),
		"bad epoch":      cat(head[:3], []any{"EP_0"}, figures, waiting, waiting),
		"no figures":     cat(head[:4], []any{[]any{}}, waiting, active),
		"short waiting":  cat(head, waiting[:4]),
		"short active":   cat(head, active[:4]),
		"unknown kind":   cat(head, []any{int64(3), int64(1), int64(1), int64(1)}),
		"one user short": cat(head, waiting),
		"one user extra": cat(head, waiting, waiting, waiting),
	} {
		_, err := decodeEnter(r, 2)
		assert.ErrorIs(t, err, flashgate.ErrInternal, name)
	}
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

// The reply reader refuses a short or mistyped reply with an error naming
// the script instead of panicking (the positional r[n] it replaced did) or
// reading a zero.
func TestReplyReaderRefusesMalformedReplies(t *testing.T) {
	for name, r := range map[string][]any{"empty": {}, "short": {"REVOKED", int64(5)},
		"mistyped": {"REVOKED", []any{}, int64(0), "j"}} {
		_, err := decodeRevoke(r)
		require.Error(t, err, name)
		assert.ErrorIs(t, err, flashgate.ErrInternal, name)
		assert.Contains(t, err.Error(), "revoke script: malformed reply", name)
	}
	v, err := decodeRevoke([]any{"REVOKED", int64(5), int64(1), "j"})
	require.NoError(t, err)
	assert.Equal(t, revokeReply{at: time.UnixMilli(5), repeated: true, jti: "j"}, v)
	_, err = decodeLeave(nil)
	assert.ErrorIs(t, err, flashgate.ErrInternal)
	_, err = decodeActive([]any{int64(1)})
	assert.ErrorIs(t, err, flashgate.ErrInternal)
	_, _, err = decodeDrain([]any{int64(1)})
	assert.ErrorIs(t, err, flashgate.ErrInternal)
	_, err = decodeBan("u", []any{"BANNED", int64(1), int64(0), ""})
	assert.ErrorIs(t, err, flashgate.ErrInternal)
	_, err = decodeSetRoom([]any{"open", int64(0), "", "x", int64(0)})
	assert.ErrorIs(t, err, flashgate.ErrInternal, "deleted_ms not a number")
	s, err := decodeSetRoom([]any{"open", int64(0), "", int64(0), "7"})
	require.NoError(t, err)
	assert.EqualValues(t, 7, s.waiting)
}
