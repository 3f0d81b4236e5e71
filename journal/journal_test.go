package journal_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/pgtest"
	"github.com/flashgate/flashgate/journal"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// store migrates a fresh database and opens a Store on it.
func store(t *testing.T) (*journal.Store, string) {
	t.Helper()
	dsn := pgtest.Shared(t).NewDatabase(t)
	require.NoError(t, journal.Migrate(context.Background(), dsn))
	s, err := journal.Open(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s, dsn
}

const epoch = "ab12cd34ef"

// sale is one buyer's life: entered, admitted through the priority lane,
// exchanged, completed; plus another buyer who waited until the room sold out,
// and a config change.
func sale() []journal.Event {
	return []journal.Event{
		{ID: "1000-0", Kind: journal.KindEntered, Room: "r", Epoch: epoch, Arrival: 7, User: "alice", Lane: "priority", At: 1000},
		{ID: "1000-1", Kind: journal.KindEntered, Room: "r", Epoch: epoch, Arrival: 8, User: "bob", Lane: "public", At: 1000},
		{ID: "2000-0", Kind: journal.KindAdmitted, Room: "r", Epoch: epoch, Arrival: 7, Lane: "priority", At: 2000,
			AdmissionID: epoch + ".7.1.2000"},
		{ID: "2500-0", Kind: journal.KindExchanged, Room: "r", Epoch: epoch, Arrival: 7, User: "alice", At: 2500,
			AdmissionID: epoch + ".7.1.2000"},
		{ID: "2600-0", Kind: journal.KindConfig, Room: "r", Epoch: epoch, At: 2600, Actor: "admin", Action: "configure",
			Detail: `{"capacity": 100}`},
		{ID: "3000-0", Kind: journal.KindCompleted, Room: "r", Epoch: epoch, Arrival: 7, At: 3000},
		{ID: "4000-0", Kind: journal.KindClosed, Room: "r", Epoch: epoch, Arrival: 8, User: "bob", At: 4000, Reason: "sold_out"},
	}
}

// dump is every row of both tables, without updated_at, in key order.
func dump(t *testing.T, dsn string) [][]any {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var out [][]any
	for _, q := range []string{
		`SELECT room, epoch, arrival, user_id, lane, entered_ms, admitted_ms, admission_id, exchanged_ms,
		        ended_ms, end_kind, end_reason FROM journal_entries ORDER BY room, epoch, arrival`,
		`SELECT room, epoch, stream_id, kind, at_ms, actor, action, detail::text FROM journal_room_events
		 ORDER BY room, epoch, stream_id`,
	} {
		rows, err := conn.Query(context.Background(), q)
		require.NoError(t, err)
		for rows.Next() {
			v, err := rows.Values()
			require.NoError(t, err)
			out = append(out, v)
		}
		require.NoError(t, rows.Err())
	}
	return out
}

func TestMigrateTwice(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	cur, latest, err := journal.SchemaVersion(context.Background(), dsn)
	require.NoError(t, err)
	require.Zero(t, cur)
	require.Positive(t, latest)

	require.NoError(t, journal.Migrate(context.Background(), dsn))
	require.NoError(t, journal.Migrate(context.Background(), dsn))
	cur, latest2, err := journal.SchemaVersion(context.Background(), dsn)
	require.NoError(t, err)
	require.Equal(t, latest, cur)
	require.Equal(t, latest, latest2)
	require.NoError(t, journal.Migrate(context.Background(), dsn))

	err = journal.Migrate(context.Background(), "postgres://%zz")
	require.ErrorIs(t, err, flashgate.ErrInvalidInput)
}

// Concurrent journal processes starting together: the advisory lock lets one
// migrate and the others find nothing pending.
func TestMigrateConcurrently(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	errs := make(chan error, 3)
	for range 3 {
		go func() { errs <- journal.Migrate(context.Background(), dsn) }()
	}
	for range 3 {
		require.NoError(t, <-errs)
	}
}

func TestApplyTwiceIsApplyOnce(t *testing.T) {
	s, dsn := store(t)
	require.NoError(t, s.Apply(context.Background(), sale()))
	once := dump(t, dsn)
	require.Len(t, once, 3) // two entries, one room event
	require.NoError(t, s.Apply(context.Background(), sale()))
	require.Equal(t, once, dump(t, dsn))
	// A batch holding the same event twice, too.
	require.NoError(t, s.Apply(context.Background(), append(sale(), sale()...)))
	require.Equal(t, once, dump(t, dsn))
}

func TestOutOfOrderConverges(t *testing.T) {
	want, wantDSN := store(t)
	require.NoError(t, want.Apply(context.Background(), sale()))
	wantRows := dump(t, wantDSN)

	rng := rand.New(rand.NewPCG(12, 34))
	for i := range 5 {
		s, dsn := store(t)
		evs := sale()
		rng.Shuffle(len(evs), func(a, b int) { evs[a], evs[b] = evs[b], evs[a] })
		if i == 0 { // admitted (and completed) before entered, for certain
			evs = []journal.Event{sale()[5], sale()[2], sale()[0], sale()[3], sale()[1], sale()[6], sale()[4]}
		}
		// One event per batch: each is its own upsert against the row so far.
		for _, e := range evs {
			require.NoError(t, s.Apply(context.Background(), []journal.Event{e}))
		}
		require.Equal(t, wantRows, dump(t, dsn), "order %v", evs)
	}
}

// Two ends of one entry (a revoke racing an expiry, delivered either way
// round) keep the earlier, whatever the order.
func TestEarlierEndWins(t *testing.T) {
	entered := journal.Event{Kind: journal.KindEntered, Room: "r", Epoch: epoch, Arrival: 1, User: "u", At: 10}
	expired := journal.Event{Kind: journal.KindExpired, Room: "r", Epoch: epoch, Arrival: 1, At: 50, Reason: "not_claimed"}
	revoked := journal.Event{Kind: journal.KindRevoked, Room: "r", Epoch: epoch, Arrival: 1, At: 40}
	for _, order := range [][]journal.Event{{entered, expired, revoked}, {revoked, expired, entered}} {
		s, _ := store(t)
		for _, e := range order {
			require.NoError(t, s.Apply(context.Background(), []journal.Event{e}))
		}
		e, err := s.Entry(context.Background(), "r", "u")
		require.NoError(t, err)
		require.Equal(t, journal.KindRevoked, e.End)
		require.Equal(t, "", e.EndReason)
		require.Equal(t, time.UnixMilli(40), e.EndedAt)
	}
}

func TestEntryAnswers(t *testing.T) {
	s, _ := store(t)
	require.NoError(t, s.Apply(context.Background(), sale()))

	a, err := s.Entry(context.Background(), "r", "alice")
	require.NoError(t, err)
	require.Equal(t, journal.Entry{
		Room: "r", Epoch: epoch, Arrival: 7, User: "alice", Lane: "priority",
		EnteredAt: time.UnixMilli(1000), AdmittedAt: time.UnixMilli(2000), AdmissionID: epoch + ".7.1.2000",
		ExchangedAt: time.UnixMilli(2500), EndedAt: time.UnixMilli(3000), End: journal.KindCompleted,
	}, a)
	require.True(t, a.Completed())

	b, err := s.Entry(context.Background(), "r", "bob")
	require.NoError(t, err)
	require.False(t, b.Completed())
	require.True(t, b.AdmittedAt.IsZero())
	require.Equal(t, journal.KindClosed, b.End)
	require.Equal(t, "sold_out", b.EndReason)

	// After a Redis data loss the room has a new epoch (arrivals restart at
	// 1): alice's newer entry is the answer, both are listed.
	later := "ab12cd35aa"
	require.NoError(t, s.Apply(context.Background(), []journal.Event{
		{Kind: journal.KindEntered, Room: "r", Epoch: later, Arrival: 1, User: "alice", Lane: "public", At: 9000},
	}))
	a2, err := s.Entry(context.Background(), "r", "alice")
	require.NoError(t, err)
	require.Equal(t, later, a2.Epoch)
	require.Equal(t, "", string(a2.End))
	all, err := s.Entries(context.Background(), "r", "alice")
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Equal(t, a, all[1])

	_, err = s.Entry(context.Background(), "r", "carol")
	require.ErrorIs(t, err, flashgate.ErrNotFound)
	_, err = s.Entry(context.Background(), "other", "alice")
	require.ErrorIs(t, err, flashgate.ErrNotFound)
}

func TestApplyRejectsInvalidBatchWhole(t *testing.T) {
	s, dsn := store(t)
	good := sale()[0]
	for name, bad := range map[string]journal.Event{
		"unknown kind":     {Kind: "teleported", Room: "r", Epoch: epoch, Arrival: 1, At: 1, ID: "1-0"},
		"bad epoch":        {Kind: journal.KindEntered, Room: "r", Epoch: "AB-", Arrival: 1, User: "u", At: 1},
		"no arrival":       {Kind: journal.KindLeft, Room: "r", Epoch: epoch, At: 1},
		"no time":          {Kind: journal.KindLeft, Room: "r", Epoch: epoch, Arrival: 1},
		"entered, no user": {Kind: journal.KindEntered, Room: "r", Epoch: epoch, Arrival: 1, At: 1},
		"foreign jti": {Kind: journal.KindAdmitted, Room: "r", Epoch: epoch, Arrival: 2, At: 1,
			AdmissionID: epoch + ".3.1.1"},
		"closed, no reason": {Kind: journal.KindClosed, Room: "r", Epoch: epoch, Arrival: 1, At: 1},
		"bad lane":          {Kind: journal.KindEntered, Room: "r", Epoch: epoch, Arrival: 1, User: "u", At: 1, Lane: "vip"},
		"detail not json":   {Kind: journal.KindAudit, Room: "r", Epoch: epoch, At: 1, ID: "1-0", Detail: "pause"},
		"room event, no id": {Kind: journal.KindConfig, Room: "r", Epoch: epoch, At: 1},
	} {
		err := s.Apply(context.Background(), []journal.Event{good, bad})
		require.ErrorIs(t, err, flashgate.ErrInvalidInput, name)
		require.Contains(t, err.Error(), "event 1", name)
	}
	require.Empty(t, dump(t, dsn))
}

func TestUnreachableIsUnavailable(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.NewDatabase(t)
	require.NoError(t, journal.Migrate(context.Background(), dsn))
	s, err := journal.Open(context.Background(), dsn)
	require.NoError(t, err)
	defer s.Close()
	srv.Stop()
	err = s.Apply(context.Background(), sale())
	require.ErrorIs(t, err, flashgate.ErrUnavailable)
	_, err = s.Entry(context.Background(), "r", "alice")
	require.True(t, errors.Is(err, flashgate.ErrUnavailable), "%v", err)
}

// TestEndOfLineClosesItsWaitingEntries: the scripts journal no event per
// entry a closed line drains; the end config event's closed_seq does it
// (closeLine): entries up to it never admitted end closed with the close
// reason at ended_ms; admitted ones and later arrivals do not; an admission
// that arrives after the rule closed an entry (out of stream order) undoes
// the close.
func TestEndOfLineClosesItsWaitingEntries(t *testing.T) {
	ctx := context.Background()
	s, _ := store(t)
	ev := func(id string, k journal.Kind, seq int64, at int64) journal.Event {
		return journal.Event{ID: id, Kind: k, Room: "r", Epoch: epoch, Arrival: seq, User: fmt.Sprint("u", seq), Lane: "public", At: at}
	}
	adm := ev("2000-0", journal.KindAdmitted, 2, 2000)
	adm.AdmissionID = epoch + ".2.1.2000"
	require.NoError(t, s.Apply(ctx, []journal.Event{
		ev("1000-0", journal.KindEntered, 1, 1000), ev("1000-1", journal.KindEntered, 2, 1000),
		ev("1000-2", journal.KindEntered, 3, 1000), ev("1000-3", journal.KindEntered, 4, 1000), adm,
		{ID: "1500-0", Kind: journal.KindLeft, Room: "r", Epoch: epoch, Arrival: 4, At: 1500},
	}))
	// A configure before the end closes nothing (no closed_seq yet).
	require.NoError(t, s.Apply(ctx, []journal.Event{{ID: "2500-0", Kind: journal.KindConfig, Room: "r", Epoch: epoch,
		At: 2500, Action: "configure", Detail: `{"state":"open","capacity":"1"}`}}))
	e, err := s.Entry(ctx, "r", "u1")
	require.NoError(t, err)
	assert.Empty(t, e.End)
	require.NoError(t, s.Apply(ctx, []journal.Event{
		{ID: "3000-0", Kind: journal.KindConfig, Room: "r", Epoch: epoch, At: 3000, Action: "end",
			Detail: `{"state":"closed","closed_seq":"3","close_reason":"sold_out","ended_ms":"3000"}`},
		ev("3500-0", journal.KindEntered, 5, 3500), // after a reopening: not of the closed line
	}))
	for user, want := range map[string]journal.Kind{"u1": journal.KindClosed, "u2": "", "u3": journal.KindClosed,
		"u4": journal.KindLeft, "u5": ""} {
		e, err := s.Entry(ctx, "r", user)
		require.NoError(t, err)
		assert.Equal(t, want, e.End, user)
		if want == journal.KindClosed {
			assert.Equal(t, "sold_out", e.EndReason)
			assert.EqualValues(t, 3000, e.EndedAt.UnixMilli())
		}
	}
	rep, err := s.Report(ctx, "r", "")
	require.NoError(t, err)
	assert.EqualValues(t, 2, rep.Closed, "the two waiting entries of the closed line")

	// u1's admission, journaled before the end but applied after it.
	late := ev("2100-0", journal.KindAdmitted, 1, 2100)
	late.AdmissionID = epoch + ".1.2.2100"
	require.NoError(t, s.Apply(ctx, []journal.Event{late}))
	e, err = s.Entry(ctx, "r", "u1")
	require.NoError(t, err)
	assert.Empty(t, e.End, "an admitted entry was never closed by its line's end")
	assert.Equal(t, late.AdmissionID, e.AdmissionID)
}
