package issuer_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
)

// configFields are the config hash fields the packed copy holds, in its
// order (lua/prelude.lua read_config_fields); clock_ms and restoring (7, 23)
// are never packed.
var configFields = []string{"state", "capacity", "rate", "session_ms", "batch", "tick_ms", "clock_ms", "opens_ms",
	"closes_ms", "epoch", "arrival_ms", "prequeue", "lottery_cutoff", "lottery_bits", "lottery_done_ms",
	"closed_seq", "close_reason", "ended_ms", "deleted_ms", "auto", "retention_ms", "journal_maxlen", "restoring"}

// assertPacked checks that room's packed config is the config's fields
// as they are.
func assertPacked(t *testing.T, rdb *redis.Client, room, step string) {
	t.Helper()
	ctx := context.Background()
	key := issuer.RoomKeys(room)[0]
	raw, err := rdb.HGet(ctx, key, "packed").Result()
	require.NoError(t, err, "%s: no packed config", step)
	var packed []any
	require.NoError(t, json.Unmarshal([]byte(raw), &packed), step)
	require.Len(t, packed, len(configFields), step)
	vals, err := rdb.HMGet(ctx, key, configFields...).Result()
	require.NoError(t, err)
	for i, f := range configFields {
		want := vals[i]
		if want == nil || f == "clock_ms" || f == "restoring" {
			want = false
		}
		assert.Equal(t, want, packed[i], "%s: packed %s", step, f)
	}
}

// TestPackedConfigFollowsEveryConfigWrite walks a room through every
// script that writes its config (create, configure, the first script's
// epoch, the lottery's draw and end, close and its end, reopen, delete)
// and checks after each that the packed copy the scripts read is the
// fields as written.
func TestPackedConfigFollowsEveryConfigWrite(t *testing.T) {
	ctx := context.Background()
	opens := newClock().Now().Add(time.Minute)
	is, clk, room, rdb := setup(t, issuer.RoomConfig{Capacity: 1, RatePerMinute: 600, Opens: opens,
		PreQueue: issuer.PreQueueShuffle})
	assertPacked(t, rdb, room, "created (SetRoom draws the epoch)")
	for _, u := range []string{"a", "b", "c"} {
		_, err := is.Enter(ctx, room, u)
		require.NoError(t, err)
	}
	assertPacked(t, rdb, room, "entered")
	clk.Advance(2 * time.Minute)
	_, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assertPacked(t, rdb, room, "opened: the lottery drawn and placed")
	_, err = is.Close(ctx, room, issuer.ReasonSoldOut)
	require.NoError(t, err)
	assertPacked(t, rdb, room, "closed: its end recorded")
	e, err := is.Enter(ctx, room, "d")
	assert.ErrorIs(t, err, flashgate.ErrRoomClosed, "the end, read from the packed copy: %+v", e)
	_, err = is.SetState(ctx, room, issuer.RoomOpen)
	require.NoError(t, err)
	assertPacked(t, rdb, room, "reopened")
	_, err = is.Enter(ctx, room, "d")
	require.NoError(t, err)
	_, err = is.DeleteRoom(ctx, room)
	require.NoError(t, err)
	assertPacked(t, rdb, room, "deleted")
}

// TestUnpackedRoomOfAnOlderVersion: a room written before the packed copy
// (its fields only) is read from its fields, and the first script packs it;
// a field written around the scripts is picked up by the next tick, an
// epoch at once (a copy of another epoch is not used).
func TestUnpackedRoomOfAnOlderVersion(t *testing.T) {
	ctx := context.Background()
	is, _, room, rdb := setup(t, issuer.RoomConfig{Capacity: 1, RatePerMinute: 600})
	a, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	key := issuer.RoomKeys(room)[0]
	require.NoError(t, rdb.HDel(ctx, key, "packed").Err()) // as an older version leaves it
	b, err := is.Enter(ctx, room, "bob")
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateWaiting, b.State)
	st, err := is.Status(ctx, room, a.User, a.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateActive, st.State)
	assertPacked(t, rdb, room, "packed by the first script")

	require.NoError(t, rdb.HSet(ctx, key, "capacity", "2").Err()) // an older replica's write
	_, err = is.Tick(ctx, room)
	require.NoError(t, err)
	assertPacked(t, rdb, room, "repacked by the tick")
	_, err = is.Tick(ctx, room)
	require.NoError(t, err)
	st, err = is.Status(ctx, room, b.User, b.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateActive, st.State, "capacity 2, read from the repacked copy, admitted bob")

	require.NoError(t, rdb.HSet(ctx, key, "epoch", "e0").Err()) // the room's data of another epoch
	st, err = is.Status(ctx, room, b.User, b.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateNotFound, st.State, "bob's token is of the epoch before")
	assertPacked(t, rdb, room, "repacked with the field's epoch")
}
