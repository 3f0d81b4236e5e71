package journal_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/journal"
)

// TestRoomState: the newest epoch's line (not an older epoch's), the config
// of that epoch (not a newer, empty room's), entries not ended plus those
// ended within max(2 × session, 10 min), the counters and the stats.
func TestRoomState(t *testing.T) {
	ctx := context.Background()
	s, _ := store(t)
	_, err := s.RoomState(ctx, "r", time.UnixMilli(0))
	require.ErrorIs(t, err, flashgate.ErrNotFound)

	const old, cur, empty = "aaaaaaaaa", "ab12cd34ef", "zz12cd34ef" // empty: created after the loss, no entries
	now := int64(10_000_000)
	ev := func(kind journal.Kind, epoch string, seq int64, at int64, o ...func(*journal.Event)) journal.Event {
		e := journal.Event{Kind: kind, Room: "r", Epoch: epoch, Arrival: seq, At: at}
		for _, f := range o {
			f(&e)
		}
		return e
	}
	user := func(u, lane string) func(*journal.Event) {
		return func(e *journal.Event) { e.User, e.Lane = u, lane }
	}
	adm := func(id string) func(*journal.Event) { return func(e *journal.Event) { e.AdmissionID = id } }
	why := func(r string) func(*journal.Event) { return func(e *journal.Event) { e.Reason = r } }
	require.NoError(t, s.Apply(ctx, []journal.Event{
		{ID: "1-0", Kind: journal.KindConfig, Room: "r", Epoch: cur, At: 100, Action: "create", Detail: `{"state":"open","session_ms":"60000","capacity":"2"}`},
		{ID: "1-0", Kind: journal.KindConfig, Room: "r", Epoch: empty, At: now, Action: "create", Detail: `{"state":"open","session_ms":"1000","capacity":"9"}`},
		ev(journal.KindEntered, old, 1, 50, user("x", "public")),
		ev(journal.KindEntered, cur, 1, 200, user("a", "public")),
		ev(journal.KindAdmitted, cur, 1, 300, adm(cur+".1.1.300"), user("a", "public")),
		ev(journal.KindCompleted, cur, 1, 400, adm(cur+".1.1.300")), // long ago: outside the horizon
		ev(journal.KindEntered, cur, 2, 200, user("b", "priority")),
		ev(journal.KindAdmitted, cur, 2, now-5000, adm(cur+".2.7.9995000"), user("b", "priority")),
		ev(journal.KindEntered, cur, 3, 200, user("c", "public")),
		ev(journal.KindLeft, cur, 3, now-1000),
		ev(journal.KindEntered, cur, 4, 200, user("d", "public")),
		ev(journal.KindEntered, cur, 5, 200, user("e", "public")),
		ev(journal.KindAdmitted, cur, 5, now-700_000, adm(cur+".5.3.9300000"), user("e", "public")),
		ev(journal.KindExpired, cur, 5, now-640_000, why("not_claimed")),
	}))
	st, err := s.RoomState(ctx, "r", time.UnixMilli(now))
	require.NoError(t, err)
	assert.Equal(t, cur, st.Epoch)
	assert.Equal(t, "2", st.Config["capacity"], "the config of the restored epoch, not the empty room's")
	assert.Equal(t, now-600_000, st.Horizon, "max(2 × 60 s, 10 min)")
	var seqs []int64
	for _, e := range st.Entries {
		seqs = append(seqs, e.Arrival)
	}
	assert.Equal(t, []int64{2, 3, 4}, seqs, "live b, left c (recent), waiting d; a and e ended before the horizon")
	assert.EqualValues(t, 5, st.MaxArrival)
	assert.EqualValues(t, 7, st.MaxAdmission)
	assert.EqualValues(t, now-1000, st.MaxAt)
	assert.Equal(t, map[string]int64{"admitted": 3, "priority_admitted": 1, "bypassed": 0, "completed": 1, "revoked": 0,
		"removed": 0, "expired": 1, "not_claimed": 1, "left": 1, "closed_out": 0, "first_admit_ms": 300}, st.Stats)
}
