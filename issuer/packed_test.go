package issuer_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
)

// configFields are the config hash fields the packed copy holds, in its
// order (lua/prelude_config.lua read_config_fields); clock_ms and restoring (7, 23)
// are never packed.
var configFields = []string{"state", "capacity", "rate", "session_ms", "batch", "tick_ms", "clock_ms", "opens_ms",
	"closes_ms", "epoch", "arrival_ms", "prequeue", "lottery_cutoff", "lottery_bits", "lottery_done_ms",
	"closed_seq", "close_reason", "ended_ms", "deleted_ms", "auto", "retention_ms", "journal_maxlen", "restoring"}

// textFields are the config fields the packed copy holds as strings; it
// holds the others as numbers (lua/prelude_config.lua CONFIG_KINDS).
var textFields = map[string]bool{"state": true, "epoch": true, "prequeue": true, "close_reason": true, "auto": true,
	"restoring": true}

// assertPacked checks that room's packed config is the config's fields
// as they are, in the packed format 2 (a 24th element: 2).
func assertPacked(t *testing.T, rdb *redis.Client, room, step string) {
	t.Helper()
	ctx := context.Background()
	key := issuer.RoomKeys(room)[0]
	raw, err := rdb.HGet(ctx, key, "packed").Result()
	require.NoError(t, err, "%s: no packed config", step)
	var packed []any
	require.NoError(t, json.Unmarshal([]byte(raw), &packed), step)
	require.Len(t, packed, len(configFields)+1, step)
	assert.Equal(t, float64(2), packed[len(configFields)], "%s: the packed format", step)
	vals, err := rdb.HMGet(ctx, key, configFields...).Result()
	require.NoError(t, err)
	for i, f := range configFields {
		want := vals[i]
		switch {
		case want == nil || f == "clock_ms" || f == "restoring":
			want = false
		case !textFields[f]:
			n, err := strconv.ParseFloat(want.(string), 64)
			require.NoError(t, err, "%s: %s", step, f)
			want = n
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

// TestPackedCopyOfAnOlderFormatIsNotUsed: a packed copy an older version
// wrote (23 strings, no format element) is not read: the scripts read the
// fields, and the first repacks them in the current format.
func TestPackedCopyOfAnOlderFormatIsNotUsed(t *testing.T) {
	ctx := context.Background()
	is, _, room, rdb := setup(t, issuer.RoomConfig{Capacity: 1, RatePerMinute: 600})
	key := issuer.RoomKeys(room)[0]
	epoch := rdb.HGet(ctx, key, "epoch").Val()
	old, err := json.Marshal([]any{"open", "5", "600", "300000", "1000", "1000", false, "0", "0", epoch, "0", "fifo",
		false, false, false, false, false, false, false, false, "0", "1000000", false})
	require.NoError(t, err)
	require.NoError(t, rdb.HSet(ctx, key, "packed", string(old)).Err()) // as an older version writes it: capacity 5
	a, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateActive, a.State)
	b, err := is.Enter(ctx, room, "bob")
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateWaiting, b.State, "capacity 1, the field's, not the older copy's 5")
	assertPacked(t, rdb, room, "repacked by the first script")
}

// TestPackedNumbersKeepEveryDigit: the packed copy holds a number of more
// than 14 significant digits exactly (cjson.encode would round it), and a
// number JSON cannot hold is not packed: the scripts read the fields.
func TestPackedNumbersKeepEveryDigit(t *testing.T) {
	ctx := context.Background()
	is, _, room, rdb := setup(t, issuer.RoomConfig{Capacity: 1, RatePerMinute: 600})
	key := issuer.RoomKeys(room)[0]
	require.NoError(t, rdb.HSet(ctx, key, "retention_ms", "123456789012345678").Err())
	_, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assertPacked(t, rdb, room, "a long number")
	raw := rdb.HGet(ctx, key, "packed").Val()
	assert.Contains(t, raw, ",1.2345678901234568e+17,", "17 significant digits")

	require.NoError(t, rdb.HSet(ctx, key, "retention_ms", "inf").Err())
	_, err = is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Zero(t, rdb.HExists(ctx, key, "packed").Val(), "inf is not packed")
	e, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateActive, e.State, "read from the fields")
}
