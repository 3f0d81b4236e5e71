package issuer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
)

// journaled builds the RestoreState a journal holds of room right now:
// its config hash (the seed kept only once drawn, as the config room event
// carries it) and the given waiting entries (public lane).
func journaled(t *testing.T, rdb *redis.Client, room string, entries map[string]*issuer.Entry, clock time.Time) issuer.RestoreState {
	ctx := context.Background()
	cfg := rdb.HGetAll(ctx, "fg:{"+room+"}:config").Val()
	if cfg["lottery_cutoff"] == "" {
		delete(cfg, "lottery_seed")
	}
	st := issuer.RestoreState{Epoch: cfg["epoch"], Config: cfg, Clock: clock, Stats: map[string]int64{}}
	for u, e := range entries {
		st.Entries = append(st.Entries, issuer.RestoreEntry{Arrival: e.Arrival, User: u, Lane: flashgate.LanePublic, EnteredAt: clock})
		st.MaxArrival = max(st.MaxArrival, e.Arrival)
	}
	return st
}

func positions(t *testing.T, is *issuer.Issuer, room string, entries map[string]*issuer.Entry) map[string]int64 {
	out := map[string]int64{}
	for u, e := range entries {
		s, err := is.Status(context.Background(), room, u, e.WaitingToken)
		require.NoError(t, err)
		require.Equal(t, flashgate.StateWaiting, s.State, u)
		out[u] = s.Position
	}
	return out
}

// TestRestoreShuffleRoomPlacesAgain: a shuffle room whose lottery was drawn
// and placed is restored with its seed, cutoff and bits; the tick places the
// pre-queue again and every entry is back at its drawn place.
func TestRestoreShuffleRoomPlacesAgain(t *testing.T) {
	ctx := context.Background()
	is, clk, room, rdb := setup(t, issuer.RoomConfig{Capacity: 1, RatePerMinute: 6000, State: issuer.RoomPaused,
		PreQueue: issuer.PreQueueShuffle})
	entries := map[string]*issuer.Entry{}
	for i := range 40 {
		e, err := is.Enter(ctx, room, fmt.Sprintf("s%02d", i))
		require.NoError(t, err)
		entries[e.User] = e
	}
	_, err := is.SetState(ctx, room, issuer.RoomOpen)
	require.NoError(t, err)
	r, err := is.Tick(ctx, room) // draws, places, admits the head
	require.NoError(t, err)
	require.Equal(t, 1, r.Admitted)
	for u, e := range entries {
		if s, _ := is.Status(ctx, room, u, e.WaitingToken); s.State != flashgate.StateWaiting {
			delete(entries, u) // the admitted one: not part of this check
		}
	}
	before := positions(t, is, room, entries)
	st := journaled(t, rdb, room, entries, clk.Now())
	require.NotEmpty(t, st.Config["lottery_seed"])

	require.NoError(t, rdb.FlushAll(ctx).Err())
	_, err = issuer.Restore(ctx, rdb, room, st, clk.Now())
	require.NoError(t, err)
	_, err = is.Tick(ctx, room) // places again (capacity is taken by nobody now: it also admits the head)
	require.NoError(t, err)
	after := map[string]int64{}
	for u, e := range entries {
		s, err := is.Status(ctx, room, u, e.WaitingToken)
		require.NoError(t, err)
		if s.State == flashgate.StateWaiting {
			after[u] = s.Position + 1
		} else {
			after[u] = 1
		}
	}
	assert.Equal(t, before, after, "the same drawn order")
}

// TestRestoreInterruptedResumes: a restore stopped after its second call
// leaves the room paused and marked restoring: every script refuses it (503
// room_lost), so nobody reads or is admitted from the half-written line;
// running it again completes it, and a third is refused.
func TestRestoreInterruptedResumes(t *testing.T) {
	ctx := context.Background()
	_, clk, room, rdb := setup(t, issuer.RoomConfig{Capacity: 10, RatePerMinute: 6000})
	cfg := rdb.HGetAll(ctx, "fg:{"+room+"}:config").Val()
	st := issuer.RestoreState{Epoch: "kx1b2c3d4e", Config: cfg, Clock: clk.Now(), MaxArrival: 2500}
	for i := range 2500 {
		st.Entries = append(st.Entries, issuer.RestoreEntry{Arrival: int64(i + 1), User: fmt.Sprintf("w%04d", i), Lane: "public"})
	}
	_, err := issuer.RestorePartly(ctx, rdb, room, st, clk.Now(), 2)
	require.Error(t, err)
	c := rdb.HGetAll(ctx, "fg:{"+room+"}:config").Val()
	assert.Equal(t, "paused", c["state"])
	assert.Equal(t, "open", c["restoring"])
	assert.EqualValues(t, issuer.RestoreBatch, rdb.ZCard(ctx, "fg:{"+room+"}:waiting").Val())
	is := newIssuer(t, rdb, clk)
	_, err = is.Tick(ctx, room)
	assert.ErrorIs(t, err, flashgate.ErrRoomLost, "no script reads a half-restored room: nobody admitted")
	_, err = is.Enter(ctx, room, "w0001")
	assert.ErrorIs(t, err, flashgate.ErrRoomLost, "an enter is told to retry (503 room_lost), not given a new place")
	assert.EqualValues(t, issuer.RestoreBatch, rdb.ZCard(ctx, "fg:{"+room+"}:waiting").Val(), "nothing written meanwhile")
	// No packed copy while restoring: the scripts read restoring only without one (load_config).
	assert.Zero(t, rdb.HExists(ctx, "fg:{"+room+"}:config", "packed").Val(), "a half-restored room has no packed copy")

	res, err := issuer.Restore(ctx, rdb, room, st, clk.Now())
	require.NoError(t, err)
	assert.Equal(t, 2500, res.Waiting)
	assert.Equal(t, 5, res.Calls, "begin, three chunks of at most 1,000, finish")
	c = rdb.HGetAll(ctx, "fg:{"+room+"}:config").Val()
	assert.Equal(t, "open", c["state"])
	assert.NotContains(t, c, "restoring")
	assert.Equal(t, "kx1b2c3d4e", c["epoch"])
	w := rdb.ZRangeWithScores(ctx, "fg:{"+room+"}:waiting", 0, -1).Val()
	require.Len(t, w, 2500)
	for i, z := range w {
		require.Equal(t, fmt.Sprintf("w%04d", i), z.Member)
		require.EqualValues(t, i+1, z.Score)
	}
	_, err = issuer.Restore(ctx, rdb, room, st, clk.Now())
	require.ErrorIs(t, err, flashgate.ErrRoomNotEmpty)
}

// TestRestoreRefusesARoomWithEntries: one entry ever made (even one that
// left: seq > 0) refuses the restore, and nothing is written.
func TestRestoreRefusesARoomWithEntries(t *testing.T) {
	ctx := context.Background()
	is, clk, room, rdb := setup(t, issuer.RoomConfig{Capacity: 1, RatePerMinute: 600, State: issuer.RoomPaused})
	e, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	require.NoError(t, is.Leave(ctx, room, "alice", e.WaitingToken))
	before := rdb.HGetAll(ctx, "fg:{"+room+"}:config").Val()
	st := issuer.RestoreState{Epoch: "kx1b2c3d4e", Config: map[string]string{"state": "open"}, Clock: clk.Now(), MaxArrival: 1,
		Entries: []issuer.RestoreEntry{{Arrival: 1, User: "bob"}}}
	_, err = issuer.Restore(ctx, rdb, room, st, clk.Now())
	require.ErrorIs(t, err, flashgate.ErrRoomNotEmpty)
	assert.Equal(t, before, rdb.HGetAll(ctx, "fg:{"+room+"}:config").Val())
	assert.Zero(t, rdb.ZCard(ctx, "fg:{"+room+"}:waiting").Val())
}
