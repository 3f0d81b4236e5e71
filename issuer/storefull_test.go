package issuer_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
)

// setMaxMemory sets Redis maxmemory (bytes; "0" = no limit).
func setMaxMemory(t testing.TB, rdb *redis.Client, v string) {
	t.Helper()
	require.NoError(t, rdb.ConfigSet(context.Background(), "maxmemory", v).Err())
}

// TestStoreFull: Redis over maxmemory (policy noeviction, the default)
// refuses commands that may allocate. New entries are refused with their own
// code, ErrStoreFull (not the generic ErrUnavailable), and readiness reports
// it; but everything that frees memory keeps working — completion, leave,
// revocation, the tick's expiry — and so do reads and repeated enters.
//
// It would fail if the OOM reply were mapped to ErrUnavailable, or if one of
// the freeing scripts wrote with a deny-oom command (HSET clock_ms, ZADD
// ended) before its first freeing write (ZREM, HDEL): Redis refuses a
// script's first write with OOM, and lets every later write through.
func TestStoreFull(t *testing.T) {
	ctx := context.Background()
	is, clk, room, rdb := setup(t, issuer.RoomConfig{Capacity: 3, SessionDuration: time.Minute})
	users := []string{"a1", "a2", "a3", "w1", "w2", "w3"}
	entries := map[string]*issuer.Entry{}
	for _, u := range users {
		e, err := is.Enter(ctx, room, u)
		require.NoError(t, err)
		entries[u] = e
	}
	for _, u := range users[:3] {
		require.Equal(t, flashgate.StateActive, entries[u].State, u)
	}
	require.Equal(t, flashgate.StateWaiting, entries["w1"].State)
	require.NoError(t, is.Ping(ctx))

	setMaxMemory(t, rdb, "1") // any data is over it
	t.Cleanup(func() { setMaxMemory(t, rdb, "0") })
	// Every step below runs at a later time, so each script that writes
	// also has to move the room's clock (keep_clock, an HSET).
	step := func() { clk.Advance(time.Second) }

	step()
	_, err := is.Enter(ctx, room, "newcomer")
	require.Error(t, err)
	assert.ErrorIs(t, err, flashgate.ErrStoreFull)
	assert.Equal(t, flashgate.CodeStoreFull, flashgate.ErrorCode(err))
	assert.NotErrorIs(t, err, flashgate.ErrUnavailable)
	assert.Contains(t, err.Error(), "OOM", "the cause is kept")
	assert.ErrorIs(t, is.Ping(ctx), flashgate.ErrStoreFull, "readiness sees it")

	step()
	again, err := is.Enter(ctx, room, "w2")
	require.NoError(t, err, "a refresh of an existing entry writes nothing")
	assert.Equal(t, entries["w2"].WaitingToken, again.WaitingToken)
	st, err := is.Status(ctx, room, "w1", entries["w1"].WaitingToken)
	require.NoError(t, err, "status only reads")
	assert.Equal(t, flashgate.StateWaiting, st.State)

	step()
	c, err := is.Complete(ctx, room, "a1", entries["a1"].AdmissionID)
	require.NoError(t, err, "completion frees memory")
	assert.False(t, c.Repeated)
	step()
	c, err = is.Complete(ctx, room, "a1", entries["a1"].AdmissionID)
	require.NoError(t, err, "a repeated completion only reads")
	assert.True(t, c.Repeated)
	step()
	require.NoError(t, is.Leave(ctx, room, "a2", entries["a2"].WaitingToken), "leave of an admission")
	step()
	require.NoError(t, is.Leave(ctx, room, "w3", entries["w3"].WaitingToken), "leave of a waiting entry")
	step()
	_, err = is.Revoke(ctx, room, "a3", "")
	require.NoError(t, err, "revocation frees memory")

	// The tick still runs: it admits from the line (ZPOPMIN first) and
	// drops lapsed admissions.
	step()
	res, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Admitted, "w1 and w2 move up into the freed capacity")
	clk.Advance(2 * time.Minute)
	res, err = is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Expired)

	// Memory back: entries are accepted again.
	setMaxMemory(t, rdb, "0")
	require.NoError(t, is.Ping(ctx))
	e, err := is.Enter(ctx, room, "newcomer")
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateActive, e.State)
}
