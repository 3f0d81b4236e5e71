package issuer_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
)

func evalCalls(t *testing.T, rdb *redis.Client) int64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	var n int64
	for _, line := range strings.Split(info, "\r\n") {
		for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
			if rest, ok := strings.CutPrefix(line, cmd+"calls="); ok {
				v, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
				n += v
			}
		}
	}
	return n
}

func TestStatusFromSnapshot(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	room := redistest.Room("snap")
	cached, err := issuer.New(issuer.Config{Redis: rdb, WaitingSecret: secret, StatusSnapshot: 2 * time.Second})
	require.NoError(t, err)
	exact, err := issuer.New(issuer.Config{Redis: rdb, WaitingSecret: secret, StatusSnapshot: -1})
	require.NoError(t, err)
	_, err = cached.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1, RatePerMinute: 60, State: issuer.RoomPaused})
	require.NoError(t, err)
	toks := map[int]string{}
	for i := 1; i <= 300; i++ {
		e, err := cached.Enter(ctx, room, "u"+strconv.Itoa(i))
		require.NoError(t, err)
		toks[i] = e.WaitingToken
	}

	// Far behind the head: estimated, and exact while nobody has left.
	before := evalCalls(t, rdb)
	for i := 100; i <= 300; i++ {
		e, err := cached.Status(ctx, room, "u"+strconv.Itoa(i), toks[i])
		require.NoError(t, err)
		assert.True(t, e.PositionEstimated, "u%d", i)
		assert.EqualValues(t, i, e.Position)
		assert.EqualValues(t, 300, e.TotalWaiting)
		assert.Equal(t, flashgate.StateWaiting, e.State)
		assert.Equal(t, toks[i], e.WaitingToken)
	}
	assert.LessOrEqual(t, evalCalls(t, rdb)-before, int64(2), "201 status answers cost one snapshot script (EVALSHA, then EVAL on NOSCRIPT the first time)")

	// Near the head (rate 60/min, tick 1 s: the first 50): exact.
	e, err := cached.Status(ctx, room, "u10", toks[10])
	require.NoError(t, err)
	assert.False(t, e.PositionEstimated)
	assert.EqualValues(t, 10, e.Position)

	// Leaves ahead make the estimate an interpolation; the exact path counts.
	for i := 60; i < 120; i++ {
		require.NoError(t, cached.Leave(ctx, room, "u"+strconv.Itoa(i), toks[i]))
	}
	fresh, err := issuer.New(issuer.Config{Redis: rdb, WaitingSecret: secret, StatusSnapshot: 2 * time.Second})
	require.NoError(t, err)
	est, err := fresh.Status(ctx, room, "u200", toks[200])
	require.NoError(t, err)
	ex, err := exact.Status(ctx, room, "u200", toks[200])
	require.NoError(t, err)
	assert.False(t, ex.PositionEstimated)
	assert.EqualValues(t, 140, ex.Position)
	assert.True(t, est.PositionEstimated)
	assert.InDelta(t, ex.Position, est.Position, 30, "interpolated between head and tail")
	assert.EqualValues(t, 240, est.TotalWaiting)

	// Someone who arrived after the snapshot gets the exact script.
	late, err := fresh.Enter(ctx, room, "late")
	require.NoError(t, err)
	st, err := fresh.Status(ctx, room, "late", late.WaitingToken)
	require.NoError(t, err)
	assert.False(t, st.PositionEstimated)
	assert.EqualValues(t, 241, st.Position)

	// Ownership is checked before any snapshot is used.
	_, err = fresh.Status(ctx, room, "u201", toks[200])
	assert.ErrorIs(t, err, flashgate.ErrOwnerMismatch)
}

// TestExchangeIgnoresSnapshot: a stale snapshot never hides an admission.
func TestExchangeIgnoresSnapshot(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	is, err := issuer.New(issuer.Config{Redis: rdb, WaitingSecret: secret, Signer: newSigner(), StatusSnapshot: 2 * time.Second})
	require.NoError(t, err)
	room := redistest.Room("snapx")
	_, err = is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1, RatePerMinute: 60, State: issuer.RoomPaused})
	require.NoError(t, err)
	var last *issuer.Entry
	for i := range 100 {
		last, err = is.Enter(ctx, room, "u"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	st, err := is.Status(ctx, room, "u99", last.WaitingToken)
	require.NoError(t, err)
	require.True(t, st.PositionEstimated)
	// Everyone ahead leaves; u99 is admitted; the snapshot (2 s) still says waiting.
	require.NoError(t, rdb.ZRemRangeByRank(ctx, issuer.RoomKeys(room)[1], 0, 98).Err())
	_, err = is.SetState(ctx, room, issuer.RoomOpen)
	require.NoError(t, err)
	res, err := is.Tick(ctx, room)
	require.NoError(t, err)
	require.Equal(t, 1, res.Admitted)
	adm, err := is.Exchange(ctx, room, "u99", last.WaitingToken)
	require.NoError(t, err, "exchange asks Redis, not the snapshot")
	assert.NotEmpty(t, adm.Token)
}
