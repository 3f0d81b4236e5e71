package journal

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flashgate/flashgate"
)

// Report is a room's aggregates over its journaled entries (issue 12, "Questions
// it answers"): counts of entries by what became of them, and how long the
// admitted ones waited. Every count is of rows of journal_entries (one row per
// entry, however many events it had), so it is exact once the stream has been
// written and a lower bound of the truth while the journal lags.
//
// The outcome counts partition Entered: an entry is "admitted" when the
// journal knows of its admission (admitted_ms or admission_id set, or it
// completed), and then exactly one of Completed, Abandoned, Live; otherwise
// exactly one of Closed, LeftWaiting, Waiting:
//
//	Entered = Completed + Abandoned + Live + Closed + LeftWaiting + Waiting
//	Admitted = Completed + Abandoned + Live
//
// Waiting entries that left the line are NOT abandoned: abandoned counts
// admissions that ended without an order (expired — unclaimed or session
// over —, left — given back —, revoked, or closed while admitted), the number
// an order team compares with its orders; a waiter who gave up is LeftWaiting.
type Report struct {
	Room string `json:"room"`
	// Epoch is the epoch reported on; "" = every epoch of the room.
	Epoch string `json:"epoch,omitempty"`

	Entered     int64 `json:"entered"`      // entries journaled
	Admitted    int64 `json:"admitted"`     // of which admitted
	Completed   int64 `json:"completed"`    // admitted, ended by an order (end_kind completed)
	Abandoned   int64 `json:"abandoned"`    // admitted, ended otherwise: expired, left, revoked, closed
	Live        int64 `json:"live"`         // admitted, not ended (as far as journaled)
	Closed      int64 `json:"closed"`       // never admitted, ended by the room closing (sold_out, closed, event_ended, deleted)
	LeftWaiting int64 `json:"left_waiting"` // never admitted, ended otherwise: left the line, revoked or banned while waiting
	Waiting     int64 `json:"waiting"`      // never admitted, not ended (as far as journaled)

	// Wait is the wait (admitted_ms − entered_ms, the room's clock) of every
	// admitted entry whose entered and admitted times are both journaled,
	// over the whole report; zero when there is none.
	Wait WaitStats `json:"wait"`
	// WaitByMinute is the same per minute of admission (UTC, floor of
	// admitted_ms to the minute), oldest first; minutes without an
	// admission are absent.
	WaitByMinute []WaitMinute `json:"wait_by_minute"`
	// Estimate is the error of the estimates shown on entering
	// (estimated_wait_ms) against those entries' waits: what the journal
	// process's flashgate_estimate_error_seconds observes, exactly.
	Estimate EstimateStats `json:"estimate"`
}

// EstimateStats compares, over the admitted entries that were shown an
// estimate on entering, the estimate with the wait (estimate − wait, ms):
// |error| percentiles (percentile_cont) and the mean signed error (the
// bias, > 0: estimates too long).
type EstimateStats struct {
	Admitted   int64   `json:"admitted"` // entries compared
	AbsP50Ms   float64 `json:"abs_error_p50_ms"`
	AbsP90Ms   float64 `json:"abs_error_p90_ms"`
	BiasMeanMs float64 `json:"bias_mean_ms"`
}

// WaitStats summarises waits in milliseconds: P50Ms and P95Ms are
// PostgreSQL's percentile_cont (linear interpolation between the two
// nearest waits), so they may fall between measured values.
type WaitStats struct {
	Admitted int64   `json:"admitted"` // waits measured
	P50Ms    float64 `json:"p50_ms"`
	P95Ms    float64 `json:"p95_ms"`
}

// WaitMinute is WaitStats for the admissions of one minute. MinuteAtMs
// is the minute's start, Unix ms; Minute is the same as RFC 3339 (UTC),
// deprecated in JSON, emitted for one release (docs/http-api.md#units).
type WaitMinute struct {
	MinuteAtMs int64     `json:"minute_at_ms"`
	Minute     time.Time `json:"minute"`
	WaitStats
}

// admittedSQL is when a row counts as admitted: the admitted event, or any
// later event that names the admission, has been journaled.
const admittedSQL = `(admitted_ms IS NOT NULL OR admission_id IS NOT NULL OR end_kind IS NOT DISTINCT FROM 'completed')`

const reportCounts = `
SELECT count(*),
       count(*) FILTER (WHERE ` + admittedSQL + `),
       count(*) FILTER (WHERE end_kind = 'completed'),
       count(*) FILTER (WHERE ` + admittedSQL + ` AND end_kind IS NOT NULL AND end_kind <> 'completed'),
       count(*) FILTER (WHERE ` + admittedSQL + ` AND end_kind IS NULL),
       count(*) FILTER (WHERE NOT ` + admittedSQL + ` AND end_kind = 'closed'),
       count(*) FILTER (WHERE NOT ` + admittedSQL + ` AND end_kind IS NOT NULL AND end_kind <> 'closed'),
       count(*) FILTER (WHERE NOT ` + admittedSQL + ` AND end_kind IS NULL),
       EXISTS (SELECT 1 FROM journal_room_events WHERE room = $1 AND ($2 = '' OR epoch = $2))
FROM journal_entries
WHERE room = $1 AND ($2 = '' OR epoch = $2)`

// reportEstimates is Report.Estimate.
const reportEstimates = `
SELECT count(*),
       COALESCE(percentile_cont(0.5) WITHIN GROUP (ORDER BY abs(estimated_wait_ms - (admitted_ms - entered_ms))), 0),
       COALESCE(percentile_cont(0.9) WITHIN GROUP (ORDER BY abs(estimated_wait_ms - (admitted_ms - entered_ms))), 0),
       COALESCE(avg(estimated_wait_ms - (admitted_ms - entered_ms)), 0)::float8
FROM journal_entries
WHERE room = $1 AND ($2 = '' OR epoch = $2) AND admitted_ms IS NOT NULL AND entered_ms IS NOT NULL
  AND estimated_wait_ms IS NOT NULL`

// reportWaits is the wait percentiles per minute of admission and, as the
// row whose minute is NULL (the empty grouping set), over all of them (that
// row is there, with count 0 and percentiles 0, when there is no wait).
const reportWaits = `
SELECT admitted_ms / 60000 AS minute,
       count(*),
       COALESCE(percentile_cont(0.5) WITHIN GROUP (ORDER BY admitted_ms - entered_ms), 0),
       COALESCE(percentile_cont(0.95) WITHIN GROUP (ORDER BY admitted_ms - entered_ms), 0)
FROM journal_entries
WHERE room = $1 AND ($2 = '' OR epoch = $2) AND admitted_ms IS NOT NULL AND entered_ms IS NOT NULL
GROUP BY GROUPING SETS ((admitted_ms / 60000), ())
ORDER BY minute NULLS FIRST`

// Report returns room's aggregates over epoch ("" = every epoch). It reads
// in one repeatable-read, read-only transaction, so counts and percentiles
// describe the same snapshot. Errors: nothing journaled for the room (and
// epoch) at all, no entry and no room event (CodeNotFound); PostgreSQL
// unreachable (CodeUnavailable) or failing (CodeInternal).
func (s *Store) Report(ctx context.Context, room, epoch string) (Report, error) {
	r := Report{Room: room, Epoch: epoch, WaitByMinute: []WaitMinute{}}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			var roomEvents bool
			if err := tx.QueryRow(ctx, reportCounts, room, epoch).Scan(&r.Entered, &r.Admitted, &r.Completed,
				&r.Abandoned, &r.Live, &r.Closed, &r.LeftWaiting, &r.Waiting, &roomEvents); err != nil {
				return err
			}
			if r.Entered == 0 && !roomEvents {
				return errNothing
			}
			e := &r.Estimate
			if err := tx.QueryRow(ctx, reportEstimates, room, epoch).Scan(&e.Admitted, &e.AbsP50Ms, &e.AbsP90Ms,
				&e.BiasMeanMs); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, reportWaits, room, epoch)
			if err != nil {
				return err
			}
			var minute *int64
			var w WaitStats
			_, err = pgx.ForEachRow(rows, []any{&minute, &w.Admitted, &w.P50Ms, &w.P95Ms}, func() error {
				if minute == nil {
					r.Wait = w
				} else {
					r.WaitByMinute = append(r.WaitByMinute, WaitMinute{MinuteAtMs: *minute * 60000,
						Minute: time.UnixMilli(*minute * 60000).UTC(), WaitStats: w})
				}
				return nil
			})
			return err
		})
	if errors.Is(err, errNothing) {
		return Report{}, flashgate.Errorf(flashgate.CodeNotFound, "journal: nothing journaled for room %q%s", room, epochSuffix(epoch))
	}
	if err != nil {
		return Report{}, dbError("report", err)
	}
	return r, nil
}

var errNothing = errors.New("nothing journaled")

func epochSuffix(epoch string) string {
	if epoch == "" {
		return ""
	}
	return " epoch " + strconv.Quote(epoch)
}

// RoomEventsLimit is the most room events RoomEvents returns.
const RoomEventsLimit = 500

// RoomEvent is one row of journal_room_events: a room config change (Kind
// "config": Action create, configure or draw; Detail the whole config after
// it) or an admin action (Kind "audit": Actor, Action, Detail its arguments).
type RoomEvent struct {
	Room     string          `json:"room"`
	Epoch    string          `json:"epoch"`
	StreamID string          `json:"stream_id"` // the Redis Stream entry id
	Kind     Kind            `json:"kind"`
	At       time.Time       `json:"-"`     // millisecond precision, the room's clock
	AtMs     int64           `json:"at_ms"` // At in Unix ms (docs/http-api.md#units)
	Actor    string          `json:"actor,omitempty"`
	Action   string          `json:"action"`
	Detail   json.RawMessage `json:"detail"` // a JSON object
}

// RoomEvents returns room's config changes and admin actions at or after
// since (the zero time: all), newest first (by time, then stream id), at
// most RoomEventsLimit of them. Empty, not an error, when there is none.
// Errors: PostgreSQL unreachable (CodeUnavailable) or failing (CodeInternal).
func (s *Store) RoomEvents(ctx context.Context, room string, since time.Time) ([]RoomEvent, error) {
	var from int64
	if !since.IsZero() {
		from = since.UnixMilli()
	}
	rows, err := s.pool.Query(ctx, `
SELECT room, epoch, stream_id, kind, at_ms, actor, action, detail::text
FROM journal_room_events
WHERE room = $1 AND at_ms >= $2
ORDER BY at_ms DESC, split_part(stream_id, '-', 1)::bigint DESC, split_part(stream_id, '-', 2)::bigint DESC
LIMIT $3`, room, from, RoomEventsLimit)
	if err != nil {
		return nil, dbError("room events", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RoomEvent, error) {
		var e RoomEvent
		var at int64
		var kind, detail string
		err := r.Scan(&e.Room, &e.Epoch, &e.StreamID, &kind, &at, &e.Actor, &e.Action, &detail)
		e.Kind, e.At, e.AtMs, e.Detail = Kind(kind), time.UnixMilli(at), at, json.RawMessage(detail)
		return e, err
	})
	if err != nil {
		return nil, dbError("room events", err)
	}
	return out, nil
}

// TimeLayout is how the journal's times are written in JSON and by
// `flashgate journal show`: RFC 3339 in UTC with milliseconds.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// EntryJSON is the JSON form of an Entry (the admin endpoint GET
// /admin/rooms/{room}/journal and `flashgate journal show --json`): times
// are Unix ms (…AtMs), absent when not journaled; the same as TimeLayout
// strings (EnteredAt, …) are deprecated, emitted for one release
// (docs/http-api.md#units); WaitMs (admitted − entered) and SessionMs
// (ended − admitted) are milliseconds, absent unless both times are
// journaled.
type EntryJSON struct {
	Room          string `json:"room"`
	Epoch         string `json:"epoch"`
	Arrival       int64  `json:"arrival"`
	User          string `json:"user,omitempty"`
	Lane          string `json:"lane,omitempty"`
	EnteredAtMs   int64  `json:"entered_at_ms,omitempty"`
	AdmittedAtMs  int64  `json:"admitted_at_ms,omitempty"`
	AdmissionID   string `json:"admission_id,omitempty"`
	ExchangedAtMs int64  `json:"exchanged_at_ms,omitempty"`
	EndedAtMs     int64  `json:"ended_at_ms,omitempty"`
	EnteredAt     string `json:"entered_at,omitempty"`
	AdmittedAt    string `json:"admitted_at,omitempty"`
	ExchangedAt   string `json:"exchanged_at,omitempty"`
	EndedAt       string `json:"ended_at,omitempty"`
	End           Kind   `json:"end,omitempty"`
	EndReason     string `json:"end_reason,omitempty"`
	Completed     bool   `json:"completed"`
	WaitMs        *int64 `json:"wait_ms,omitempty"`
	SessionMs     *int64 `json:"session_ms,omitempty"`
}

// JSON returns e's JSON form.
func (e Entry) JSON() EntryJSON {
	ts := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(TimeLayout)
	}
	ms := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixMilli()
	}
	between := func(a, b time.Time) *int64 {
		if a.IsZero() || b.IsZero() {
			return nil
		}
		d := b.Sub(a).Milliseconds()
		return &d
	}
	return EntryJSON{Room: e.Room, Epoch: e.Epoch, Arrival: e.Arrival, User: e.User, Lane: e.Lane,
		EnteredAtMs: ms(e.EnteredAt), AdmittedAtMs: ms(e.AdmittedAt), AdmissionID: e.AdmissionID,
		ExchangedAtMs: ms(e.ExchangedAt), EndedAtMs: ms(e.EndedAt),
		EnteredAt: ts(e.EnteredAt), AdmittedAt: ts(e.AdmittedAt),
		ExchangedAt: ts(e.ExchangedAt), EndedAt: ts(e.EndedAt), End: e.End, EndReason: e.EndReason,
		Completed: e.Completed(), WaitMs: between(e.EnteredAt, e.AdmittedAt), SessionMs: between(e.AdmittedAt, e.EndedAt)}
}

// Connect is Open without waiting for the server: the pool connects on first
// use, so a reader (flashgate serve's admin journal routes) can start while
// PostgreSQL is away and answer 503 until it is back. Errors: an unparsable
// DSN (CodeInvalidInput).
func Connect(dsn string) (*Store, error) {
	cfg, err := pgxConfig(dsn)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, dbError("connect", err)
	}
	return &Store{pool: pool}, nil
}

// Ping checks that PostgreSQL answers. Errors: CodeUnavailable.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return dbError("connect", err)
	}
	return nil
}
