package journal_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/journal"
)

// base is a minute's start (ms since 1970), so the synthetic admissions fall
// in known minutes: m0 = base, m1 = base + 1 min.
const base int64 = 28333334 * 60000

const epoch2 = "zz99yy88xx"

// reportJournal is a room whose every entry has a known fate (the comment
// says what Report must count it as) and a known wait, plus an entry of
// another epoch and one of another room.
func reportJournal() []journal.Event {
	ev := func(kind journal.Kind, arrival int64, at int64, f ...func(*journal.Event)) journal.Event {
		e := journal.Event{Kind: kind, Room: "r", Epoch: epoch, Arrival: arrival, At: at}
		if kind == journal.KindEntered {
			e.User, e.Lane = "u"+string(rune('0'+arrival)), "public"
		}
		for _, g := range f {
			g(&e)
		}
		return e
	}
	adm := func(arrival, at int64) journal.Event {
		return ev(journal.KindAdmitted, arrival, at, func(e *journal.Event) {
			e.AdmissionID = flashgate.AdmissionID{Epoch: epoch, Arrival: arrival, Number: arrival, AdmittedAt: time.UnixMilli(at)}.String()
		})
	}
	reason := func(r string) func(*journal.Event) { return func(e *journal.Event) { e.Reason = r } }
	shown := func(ms int64) func(*journal.Event) {
		return func(e *journal.Event) { d := time.Duration(ms) * time.Millisecond; e.EstimatedWait = &d }
	}
	return []journal.Event{
		// 1: completed, waited 1 s, admitted in m0.
		// Shown 2 s, 1 s, 68 s on entering (1 … 3): errors +1 s, −2 s, +4 s.
		ev(journal.KindEntered, 1, base, shown(2000)), adm(1, base+1000), ev(journal.KindCompleted, 1, base+5000),
		// 2: abandoned (unclaimed), waited 3 s, m0.
		ev(journal.KindEntered, 2, base, shown(1000)), adm(2, base+3000), ev(journal.KindExpired, 2, base+63000, reason("not_claimed")),
		// 3: abandoned (gave the admission back), waited 64 s, m1.
		ev(journal.KindEntered, 3, base+1000, shown(68000)), adm(3, base+65000), ev(journal.KindLeft, 3, base+70000),
		// 4: live, waited 68 s, m1.
		ev(journal.KindEntered, 4, base+2000), adm(4, base+70000),
		// 5: closed while waiting.
		ev(journal.KindEntered, 5, base+3000, shown(9000)), ev(journal.KindClosed, 5, base+90000, reason("sold_out")),
		// 6 and 7: left the line, banned while waiting.
		ev(journal.KindEntered, 6, base+3000), ev(journal.KindLeft, 6, base+4000),
		ev(journal.KindEntered, 7, base+3000), ev(journal.KindRevoked, 7, base+4000, reason("banned")),
		// 8: still waiting.
		ev(journal.KindEntered, 8, base+4000),
		// 9: only its completion has been journaled yet: admitted and
		// completed, no wait measured.
		ev(journal.KindCompleted, 9, base+80000),
		// Another epoch of the room: waited 0.5 s, m0.
		{Kind: journal.KindEntered, Room: "r", Epoch: epoch2, Arrival: 1, User: "u1", At: base},
		{Kind: journal.KindAdmitted, Room: "r", Epoch: epoch2, Arrival: 1, At: base + 500,
			AdmissionID: flashgate.AdmissionID{Epoch: epoch2, Arrival: 1, Number: 1, AdmittedAt: time.UnixMilli(base + 500)}.String()},
		// Another room.
		{Kind: journal.KindEntered, Room: "other", Epoch: epoch, Arrival: 1, User: "u1", At: base},
	}
}

func TestReport(t *testing.T) {
	s, _ := store(t)
	ctx := context.Background()
	require.NoError(t, s.Apply(ctx, reportJournal()))
	m0, m1 := time.UnixMilli(base).UTC(), time.UnixMilli(base+60000).UTC()

	r, err := s.Report(ctx, "r", epoch)
	require.NoError(t, err)
	ws := func(n int64, p50, p95 float64) journal.WaitStats {
		return journal.WaitStats{Admitted: n, P50Ms: p50, P95Ms: p95}
	}
	require.Equal(t, journal.Report{Room: "r", Epoch: epoch,
		Entered: 9, Admitted: 5, Completed: 2, Abandoned: 2, Live: 1, Closed: 1, LeftWaiting: 2, Waiting: 1,
		// waits 1000, 3000, 64000, 68000: percentile_cont interpolates.
		Wait: ws(4, 33500, 67400),
		WaitByMinute: []journal.WaitMinute{
			{MinuteAtMs: m0.UnixMilli(), Minute: m0, WaitStats: ws(2, 2000, 2900)},
			{MinuteAtMs: m1.UnixMilli(), Minute: m1, WaitStats: ws(2, 66000, 67800)},
		},
		// |errors| 1000, 2000, 4000 (5 was shown one but never admitted).
		Estimate: journal.EstimateStats{Admitted: 3, AbsP50Ms: 2000, AbsP90Ms: 3600, BiasMeanMs: 1000}}, roundReport(r))

	// Every epoch: the other epoch's entry joins m0 (waits 500, 1000, 3000).
	r, err = s.Report(ctx, "r", "")
	require.NoError(t, err)
	require.Equal(t, int64(10), r.Entered)
	require.Equal(t, int64(6), r.Admitted)
	require.Equal(t, int64(2), r.Live)
	require.Equal(t, []journal.WaitMinute{
		{MinuteAtMs: m0.UnixMilli(), Minute: m0, WaitStats: ws(3, 1000, 2800)},
		{MinuteAtMs: m1.UnixMilli(), Minute: m1, WaitStats: ws(2, 66000, 67800)},
	}, roundReport(r).WaitByMinute)
	require.Equal(t, r.Entered, r.Completed+r.Abandoned+r.Live+r.Closed+r.LeftWaiting+r.Waiting)

	// Nothing journaled: not found, for a room and for an epoch.
	_, err = s.Report(ctx, "nope", "")
	require.ErrorIs(t, err, flashgate.ErrNotFound)
	_, err = s.Report(ctx, "r", "aaaaaaaaaa")
	require.ErrorIs(t, err, flashgate.ErrNotFound)

	// A room with only a config change: all zero, not an error.
	require.NoError(t, s.Apply(ctx, []journal.Event{{ID: "5-0", Kind: journal.KindConfig, Room: "quiet", Epoch: epoch,
		At: base, Action: "create", Detail: `{"capacity":"5"}`}}))
	r, err = s.Report(ctx, "quiet", "")
	require.NoError(t, err)
	require.Equal(t, journal.Report{Room: "quiet", WaitByMinute: []journal.WaitMinute{}}, r)
}

// roundReport rounds the percentiles to 1/1000 ms: percentile_cont is
// double precision arithmetic.
func roundReport(r journal.Report) journal.Report {
	rd := func(w *journal.WaitStats) {
		w.P50Ms = float64(int64(w.P50Ms*1000+0.5)) / 1000
		w.P95Ms = float64(int64(w.P95Ms*1000+0.5)) / 1000
	}
	rd(&r.Wait)
	for i := range r.WaitByMinute {
		rd(&r.WaitByMinute[i].WaitStats)
	}
	return r
}

func TestRoomEvents(t *testing.T) {
	s, _ := store(t)
	ctx := context.Background()
	cfg := func(id string, at int64, action string) journal.Event {
		return journal.Event{ID: id, Kind: journal.KindConfig, Room: "r", Epoch: epoch, At: at, Action: action,
			Detail: `{"state":"open"}`}
	}
	require.NoError(t, s.Apply(ctx, []journal.Event{
		cfg("1000-0", 1000, "create"),
		cfg("2000-9", 2000, "configure"),
		{ID: "2000-10", Kind: journal.KindAudit, Room: "r", Epoch: epoch, At: 2000, Actor: "admin", Action: "pause"},
		cfg("3000-0", 3000, "configure"),
		{ID: "1-0", Kind: journal.KindConfig, Room: "other", Epoch: epoch, At: 5000, Action: "create"},
	}))
	evs, err := s.RoomEvents(ctx, "r", time.UnixMilli(2000))
	require.NoError(t, err)
	var got []string
	for _, e := range evs {
		got = append(got, e.StreamID+" "+string(e.Kind)+" "+e.Action+" "+e.Actor+" "+string(e.Detail))
	}
	// Newest first; 2000-10 after 2000-9 in the stream, so before it here.
	require.Equal(t, []string{
		`3000-0 config configure  {"state": "open"}`,
		`2000-10 audit pause admin {}`,
		`2000-9 config configure  {"state": "open"}`,
	}, got)
	require.Equal(t, time.UnixMilli(3000), evs[0].At)
	b, err := json.Marshal(evs[0])
	require.NoError(t, err)
	require.Contains(t, string(b), `"at_ms":3000`, "JSON instants are Unix ms")
	require.NotContains(t, string(b), `"at":`)
	all, err := s.RoomEvents(ctx, "r", time.Time{})
	require.NoError(t, err)
	require.Len(t, all, 4)
	none, err := s.RoomEvents(ctx, "nope", time.Time{})
	require.NoError(t, err)
	require.Empty(t, none)
}
