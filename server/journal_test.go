package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/pgtest"
	"github.com/flashgate/flashgate/journal"
)

// fakeJournal answers from memory; err, when set, is every answer.
type fakeJournal struct {
	entries map[string][]journal.Entry // by room + "/" + user
	reports map[string]journal.Report  // by room
	err     error
}

func (f *fakeJournal) Entries(_ context.Context, room, user string) ([]journal.Entry, error) {
	return f.entries[room+"/"+user], f.err
}

func (f *fakeJournal) Report(_ context.Context, room, epoch string) (journal.Report, error) {
	if f.err != nil {
		return journal.Report{}, f.err
	}
	r, ok := f.reports[room]
	if !ok {
		return r, flashgate.Errorf(flashgate.CodeNotFound, "journal: nothing journaled for room %q", room)
	}
	r.Epoch = epoch
	return r, nil
}

const jEpoch = "ab12cd34ef"

func TestJournalRoutesWithoutJournal(t *testing.T) {
	e := newEnv(t)
	adm := func(path string) resp { return e.do(req{method: "GET", path: path, bearer: adminToken}) }
	p := adm("/admin/rooms/r/journal?user=alice").problem(t, 404, "journal_off")
	require.Contains(t, p["detail"], "FLASHGATE_JOURNAL_DSN")
	adm("/admin/rooms/r/journal/report").problem(t, 404, "journal_off")
	// Behind the admin token like every admin route.
	e.do(req{method: "GET", path: "/admin/rooms/r/journal?user=alice"}).problem(t, 401, "admin_unauthorized")
}

func TestJournalRoutes(t *testing.T) {
	at := func(ms int64) time.Time { return time.UnixMilli(ms) }
	alice := journal.Entry{Room: "r", Epoch: jEpoch, Arrival: 7, User: "alice", Lane: "priority",
		EnteredAt: at(1_000), AdmittedAt: at(42_200), AdmissionID: jEpoch + ".7.1.42200", ExchangedAt: at(43_000),
		EndedAt: at(100_000), End: journal.KindCompleted}
	older := journal.Entry{Room: "r", Epoch: jEpoch, Arrival: 2, User: "alice", EnteredAt: at(500),
		EndedAt: at(900), End: journal.KindLeft}
	f := &fakeJournal{
		entries: map[string][]journal.Entry{"r/alice": {alice, older}},
		reports: map[string]journal.Report{"r": {Room: "r", Entered: 2, Admitted: 1, Completed: 1, LeftWaiting: 1,
			Wait:         journal.WaitStats{Admitted: 1, P50Ms: 41200, P95Ms: 41200},
			WaitByMinute: []journal.WaitMinute{{MinuteAtMs: 60_000, Minute: time.UnixMilli(60_000).UTC(), WaitStats: journal.WaitStats{Admitted: 1, P50Ms: 41200, P95Ms: 41200}}}}},
	}
	e := newEnv(t, withOptions(func(o *Options) { o.Journal = f }))
	adm := func(path string) resp { return e.do(req{method: "GET", path: path, bearer: adminToken}) }

	r := adm("/admin/rooms/r/journal?user=alice")
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Equal(t, "no-store", r.header.Get("Cache-Control"))
	require.JSONEq(t, `{"room":"r","user":"alice","entries":[
		{"room":"r","epoch":"ab12cd34ef","arrival":7,"user":"alice","lane":"priority",
		 "entered_at_ms":1000,"admitted_at_ms":42200,"exchanged_at_ms":43000,"ended_at_ms":100000,
		 "entered_at":"1970-01-01T00:00:01.000Z","admitted_at":"1970-01-01T00:00:42.200Z",
		 "admission_id":"ab12cd34ef.7.1.42200","exchanged_at":"1970-01-01T00:00:43.000Z",
		 "ended_at":"1970-01-01T00:01:40.000Z","end":"completed","completed":true,"wait_ms":41200,"session_ms":57800},
		{"room":"r","epoch":"ab12cd34ef","arrival":2,"user":"alice","entered_at_ms":500,"ended_at_ms":900,
		 "entered_at":"1970-01-01T00:00:00.500Z","ended_at":"1970-01-01T00:00:00.900Z","end":"left","completed":false}]}`, string(r.body))

	adm("/admin/rooms/r/journal?user=bob").problem(t, 404, "not_found")
	adm("/admin/rooms/r/journal").problem(t, 400, "invalid_input")
	adm("/admin/rooms/r/journal?user=a%20b").problem(t, 400, "invalid_input")

	r = adm("/admin/rooms/r/journal/report?epoch=" + jEpoch)
	require.Equal(t, 200, r.status, "%s", r.body)
	require.JSONEq(t, `{"room":"r","epoch":"ab12cd34ef","entered":2,"admitted":1,"completed":1,"abandoned":0,
		"live":0,"closed":0,"left_waiting":1,"waiting":0,"wait":{"admitted":1,"p50_ms":41200,"p95_ms":41200},
		"wait_by_minute":[{"minute_at_ms":60000,"minute":"1970-01-01T00:01:00Z","admitted":1,"p50_ms":41200,"p95_ms":41200}],
		"estimate":{"admitted":0,"abs_error_p50_ms":0,"abs_error_p90_ms":0,"bias_mean_ms":0}}`, string(r.body))
	adm("/admin/rooms/nope/journal/report").problem(t, 404, "not_found")
	adm("/admin/rooms/r/journal/report?epoch=NOT-AN-EPOCH").problem(t, 400, "invalid_input")

	// PostgreSQL away: 503, worded as the journal's outage.
	f.err = &flashgate.Error{Code: flashgate.CodeUnavailable, Message: "journal: query", Err: errors.New("connection refused")}
	p := adm("/admin/rooms/r/journal?user=alice").problem(t, 503, "unavailable")
	require.Contains(t, p["detail"], "journal")
	adm("/admin/rooms/r/journal/report").problem(t, 503, "unavailable")
}

// The routes over a real journal: *journal.Store is a Journal.
func TestJournalRoutesPostgres(t *testing.T) {
	dsn := pgtest.Start(t).NewDatabase(t)
	ctx := context.Background()
	require.NoError(t, journal.Migrate(ctx, dsn))
	st, err := journal.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.NoError(t, st.Apply(ctx, []journal.Event{
		{Kind: journal.KindEntered, Room: "r", Epoch: jEpoch, Arrival: 1, User: "alice", Lane: "public", At: 60_000},
		{Kind: journal.KindAdmitted, Room: "r", Epoch: jEpoch, Arrival: 1, At: 61_500, AdmissionID: jEpoch + ".1.1.61500"},
		{Kind: journal.KindExpired, Room: "r", Epoch: jEpoch, Arrival: 1, At: 121_500, Reason: "not_claimed"},
	}))
	e := newEnv(t, withOptions(func(o *Options) { o.Journal = st }))
	adm := func(path string) resp { return e.do(req{method: "GET", path: path, bearer: adminToken}) }

	r := adm("/admin/rooms/r/journal?user=alice")
	require.Equal(t, 200, r.status, "%s", r.body)
	ent := r.json(t)["entries"].([]any)[0].(map[string]any)
	require.Equal(t, jEpoch+".1.1.61500", ent["admission_id"])
	require.Equal(t, "expired", ent["end"])
	require.Equal(t, "not_claimed", ent["end_reason"])
	require.EqualValues(t, 1500, ent["wait_ms"])
	adm("/admin/rooms/r/journal?user=bob").problem(t, 404, "not_found")

	r = adm("/admin/rooms/r/journal/report")
	require.Equal(t, 200, r.status, "%s", r.body)
	rep := r.json(t)
	require.EqualValues(t, 1, rep["abandoned"])
	require.EqualValues(t, 1500, rep["wait"].(map[string]any)["p50_ms"])
}
