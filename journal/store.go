package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flashgate/flashgate"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Kind is what an Event records. The entry kinds change one entry (one row of
// journal_entries); the room kinds append one row to journal_room_events.
type Kind string

// Entry kinds (docs/concepts.md#what-flashgate-is, vocabulary): one per state change
// of an entry.
const (
	KindEntered   Kind = "entered"   // the entry was created: User, Lane, At = entered
	KindAdmitted  Kind = "admitted"  // admitted through Lane: AdmissionID (the jti), At = admitted
	KindExchanged Kind = "exchanged" // the waiting token was exchanged for the admission: At, AdmissionID
	KindCompleted Kind = "completed" // the admission was consumed by an order: At = ended
	KindRevoked   Kind = "revoked"   // an operator ended it: At = ended, Reason optional
	KindExpired   Kind = "expired"   // the session lapsed: At = ended, Reason "not_claimed" for an unclaimed admission
	KindLeft      Kind = "left"      // the buyer left the line or gave the admission back: At = ended
	KindClosed    Kind = "closed"    // the room closed while waiting: At = ended, Reason sold_out|closed|event_ended|deleted
)

// Room kinds.
const (
	KindConfig Kind = "config" // a room config change: Action (e.g. "configure"), Detail = the new config as JSON
	KindAudit  Kind = "audit"  // an admin action (pause, revoke, ban, …): Actor, Action, Detail
)

func (k Kind) ends() bool {
	switch k {
	case KindCompleted, KindRevoked, KindExpired, KindLeft, KindClosed:
		return true
	}
	return false
}

func (k Kind) entry() bool {
	return k == KindEntered || k == KindAdmitted || k == KindExchanged || k.ends()
}

// Event is one journal record, as an entry of a room's Redis Stream carries
// it (one stream field per Go field, named by the json tag; times in ms since
// 1970 by the room's clock, the same clock the scripts write). Which fields
// each Kind needs is listed at the Kind constants and checked by Apply; the
// others are ignored.
type Event struct {
	// ID is the stream entry id ("<ms>-<n>"). The key of a room event within
	// its room and epoch; informational for entry events.
	ID   string `json:"id"`
	Kind Kind   `json:"kind"`
	// Room is the room id; Epoch the room's epoch when the change happened
	// (invariant 6: [flashgate.ValidEpoch]).
	Room  string `json:"room"`
	Epoch string `json:"epoch"`
	// Arrival is the entry's arrival number (≥ 1), entry kinds only.
	Arrival int64 `json:"seq"`
	// User is the buyer's user id: required for entered, optional elsewhere
	// (a script that ends an entry by its admission id may not know it).
	User string `json:"user"`
	// Lane is public, priority or bypass (entered, admitted); "" unknown.
	Lane string `json:"lane"`
	// At is when the change happened, ms since 1970.
	At int64 `json:"at"`
	// AdmissionID is the admission's jti "<epoch>.<arrival>.<admission>.<admitted_ms>"
	// (flashgate.AdmissionID): required for admitted, optional for exchanged.
	AdmissionID string `json:"admission"`
	// Reason refines an end (closed: required) or names an audit's target.
	Reason string `json:"reason"`
	// Actor, Action and Detail (a JSON object, "" for {}) describe room events.
	Actor  string `json:"actor"`
	Action string `json:"action"`
	Detail string `json:"detail"`
	// EstimatedWait is the estimate the enter reply showed the buyer (entered
	// only; the stream's "eta" field, ms): nil when none was shown (a fast
	// track, a pre-queue place, a room paused by the operator, a priority or
	// bypass entry) or not journaled.
	EstimatedWait *time.Duration `json:"eta,omitempty"`
}

// Validate returns why e cannot be journaled (CodeInvalidInput), or nil:
// the check Apply makes of every event before writing any.
func (e *Event) Validate() error {
	if why := e.validate(); why != "" {
		return flashgate.Errorf(flashgate.CodeInvalidInput, "journal: %s", why)
	}
	return nil
}

// validate returns why e cannot be journaled, or "".
func (e *Event) validate() string {
	for _, f := range [...]string{e.ID, e.Room, e.Epoch, e.User, e.Lane, e.AdmissionID, e.Reason, e.Actor, e.Action, e.Detail} {
		// PostgreSQL's text refuses both: the whole batch would fail, again and again.
		if strings.ContainsRune(f, 0) || !utf8.ValidString(f) {
			return "a field holds a NUL byte or is not UTF-8"
		}
	}
	switch {
	case e.Room == "":
		return "no room"
	case !flashgate.ValidEpoch(e.Epoch):
		return fmt.Sprintf("epoch %q is not a room epoch", e.Epoch)
	case e.At <= 0:
		return "no time (at)"
	case e.Lane != "" && e.Lane != "public" && e.Lane != "priority" && e.Lane != "bypass":
		return fmt.Sprintf("unknown lane %q", e.Lane)
	case e.EstimatedWait != nil && (*e.EstimatedWait < 0 || *e.EstimatedWait%time.Millisecond != 0):
		return fmt.Sprintf("estimated wait %s is not whole milliseconds ≥ 0", *e.EstimatedWait)
	}
	if e.Kind.entry() {
		if e.Arrival < 1 {
			return "no arrival number"
		}
		if e.Kind == KindEntered && e.User == "" {
			return "entered without a user"
		}
		if e.Kind == KindAdmitted && e.AdmissionID == "" {
			return "admitted without an admission id"
		}
		if e.AdmissionID != "" {
			id, ok := flashgate.ParseAdmissionID(e.AdmissionID)
			if !ok || id.Epoch != e.Epoch || id.Arrival != e.Arrival {
				return fmt.Sprintf("admission id %q is not entry %s.%d's", e.AdmissionID, e.Epoch, e.Arrival)
			}
		}
		if e.Kind == KindClosed && e.Reason == "" {
			return "closed without a reason"
		}
		return ""
	}
	if e.Kind != KindConfig && e.Kind != KindAudit {
		return fmt.Sprintf("unknown kind %q", e.Kind)
	}
	if e.ID == "" {
		return "room event without a stream id"
	}
	if e.Detail != "" {
		var obj map[string]any
		if err := json.Unmarshal([]byte(e.Detail), &obj); err != nil {
			return "detail is not a JSON object"
		}
	}
	return ""
}

// Store reads and writes the journal in PostgreSQL through a pgx pool.
type Store struct {
	pool *pgxpool.Pool
}

// Open connects to the journal at dsn (the schema must have been migrated:
// Migrate). Errors: an unparsable DSN (CodeInvalidInput), an unreachable
// server (CodeUnavailable).
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgxConfig(dsn)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, dbError("connect", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, dbError("connect", err)
	}
	return &Store{pool: pool}, nil
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

func pgxConfig(dsn string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors quote the DSN, password and all: say less.
		return nil, flashgate.Errorf(flashgate.CodeInvalidInput, "journal: unparsable PostgreSQL DSN")
	}
	return cfg, nil
}

// upsertEntry merges one entry event into its row. Every column converges
// whatever order the events come in and however often each comes (the
// stream delivers at least once, and a batch may be retried after a partial
// failure): set-once text columns keep their first non-NULL value (one writer
// per column, so every delivery carries the same value), times keep the
// earliest (LEAST ignores NULL), and of two ends the earlier wins (ties: the
// smaller kind), so end_kind/end_reason/ended_ms always come from one event.
// One exception: an end 'closed' was set by closeLine's rule, which holds
// only for entries never admitted, so an event that shows an admission
// (admitted_ms or admission_id) replaces it (by its own end, or none).
const upsertEntry = `
INSERT INTO journal_entries AS j (room, epoch, arrival, user_id, lane, entered_ms, admitted_ms,
    admission_id, exchanged_ms, ended_ms, end_kind, end_reason, estimated_wait_ms, admission_no)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
ON CONFLICT (room, epoch, arrival) DO UPDATE SET
    estimated_wait_ms = COALESCE(j.estimated_wait_ms, EXCLUDED.estimated_wait_ms),
    admission_no = COALESCE(j.admission_no, EXCLUDED.admission_no),
    user_id      = COALESCE(j.user_id, EXCLUDED.user_id),
    lane         = COALESCE(j.lane, EXCLUDED.lane),
    entered_ms   = LEAST(j.entered_ms, EXCLUDED.entered_ms),
    admitted_ms  = LEAST(j.admitted_ms, EXCLUDED.admitted_ms),
    admission_id = COALESCE(j.admission_id, EXCLUDED.admission_id),
    exchanged_ms = LEAST(j.exchanged_ms, EXCLUDED.exchanged_ms),
    ended_ms     = CASE WHEN ` + closedWrong + ` OR ` + newEndWins + ` THEN EXCLUDED.ended_ms ELSE j.ended_ms END,
    end_kind     = CASE WHEN ` + closedWrong + ` OR ` + newEndWins + ` THEN EXCLUDED.end_kind ELSE j.end_kind END,
    end_reason   = CASE WHEN ` + closedWrong + ` OR ` + newEndWins + ` THEN EXCLUDED.end_reason ELSE j.end_reason END,
    updated_at   = now()
RETURNING j.entered_ms, j.admitted_ms, j.estimated_wait_ms`

const closedWrong = `(j.end_kind = 'closed' AND (EXCLUDED.admitted_ms IS NOT NULL OR EXCLUDED.admission_id IS NOT NULL))`

// closeLine applies the end of a line ($1 room, $2 epoch): the scripts do not
// journal the entries a closed line drains one by one (lua/drain.lua); a
// config event whose detail has closed_seq and ended_ms (the 'end' event,
// and every later config event of the room) says every entry up to
// closed_seq never admitted ended 'closed' then, with close_reason — as
// Redis itself records it. Each such entry without an end gets the earliest
// such close covering it. It runs in the transaction of a batch holding such
// an event, after the batch's entry events (ApplyWaits); an entry event of
// the closed line applied in a later batch (a redelivery out of stream
// order) is not closed by it until the room's next such event.
const closeLine = `
WITH ends AS (
    SELECT (detail->>'closed_seq')::bigint AS seq, (detail->>'ended_ms')::bigint AS at,
           COALESCE(NULLIF(detail->>'close_reason', ''), 'closed') AS reason
    FROM journal_room_events
    WHERE room = $1 AND epoch = $2 AND kind = 'config'
      AND detail->>'closed_seq' ~ '^[0-9]{1,18}$' AND detail->>'ended_ms' ~ '^[0-9]{1,18}$'
      AND (detail->>'closed_seq')::bigint > 0
)
UPDATE journal_entries j SET (ended_ms, end_kind, end_reason, updated_at) =
    (SELECT e.at, 'closed', e.reason, now() FROM ends e WHERE e.seq >= j.arrival ORDER BY e.at, e.seq LIMIT 1)
WHERE j.room = $1 AND j.epoch = $2 AND j.ended_ms IS NULL AND j.admitted_ms IS NULL
  AND j.admission_id IS NULL AND j.arrival <= (SELECT max(seq) FROM ends)`

const newEndWins = `(EXCLUDED.ended_ms IS NOT NULL AND (j.ended_ms IS NULL OR
    (EXCLUDED.ended_ms, EXCLUDED.end_kind, COALESCE(EXCLUDED.end_reason, '')) < (j.ended_ms, j.end_kind, COALESCE(j.end_reason, ''))))`

// insertRoomEvent appends a room event once: a redelivery is the same
// (room, epoch, stream id) and does nothing.
const insertRoomEvent = `
INSERT INTO journal_room_events (room, epoch, stream_id, kind, at_ms, actor, action, detail)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb)
ON CONFLICT (room, epoch, stream_id) DO NOTHING`

// Apply writes events in one transaction: all of them or none. Idempotent
// and order-insensitive per entry (see upsertEntry), so a consumer may ack
// its stream entries after Apply returns nil and redeliver after an error.
// Errors: an invalid event (CodeInvalidInput, naming its index; nothing is
// written), PostgreSQL unreachable (CodeUnavailable), or a rejected
// statement (CodeInternal).
func (s *Store) Apply(ctx context.Context, events []Event) error {
	_, err := s.ApplyWaits(ctx, events)
	return err
}

// Wait is one entry's wait, enter → admitted, as ApplyWaits reports it.
type Wait struct {
	Room    string
	Epoch   string
	Arrival int64
	// Wait is admitted_ms − entered_ms of the entry's row, both by the room's
	// clock (millisecond precision; ≥ 0 unless the room's clock went back).
	Wait time.Duration
	// Estimate is the wait the buyer was shown on entering (Event.EstimatedWait
	// of the entered event), or −1 when none was shown.
	Estimate time.Duration
}

// Finding is one admitted event an Apply found out of line (ApplyChecked).
type Finding struct {
	Room, Epoch, Lane string
	Arrival           int64 // the admitted entry's
	// Count is how many: for an inversion, the admissions of the same lane
	// it is out of order with; for a rate overshoot, 1.
	Count int64
}

// Applied is what ApplyChecked reports of a batch it wrote.
type Applied struct {
	Waits []Wait // as ApplyWaits
	// Inversions: for each admitted event of the public or priority lane, the
	// admissions of its lane (room, epoch) already journaled that it is out of
	// order with — one that arrived later but was admitted before it, or one
	// that arrived earlier but was admitted after it (admission numbers, from
	// the admission ids, give the admission order). A lottery room's drawn
	// pre-queue (arrival ≤ the draw's lottery_cutoff; all of it while the
	// draw is not journaled) is in no order by arrival: pairs of two such
	// entries are not counted; an entry of it admitted after a later arrival
	// is. Each pair is found by whichever of its two admitted events is
	// applied second. Must be 0.
	Inversions []Finding
	// RateOvershoots and CapacityOvershoots: once per (room, epoch, time) of
	// the batch's admitted events (a tick admits its batch at one time), the
	// room's journaled admissions beyond its limits then, as Count: beyond
	// the rate in the trailing 60 s (admitted_ms in (at − 60 s, at]), and
	// beyond the capacity live at at (admitted by at, not ended by at, and
	// admitted less than the room's shortest session_ms before at) — each
	// limit as the room's last config event at or before at sets it. Must be
	// 0. Exact when every event before the batch's in the stream has been
	// applied (the consumer checks); otherwise an end or a config change
	// not yet applied can make a live count or a limit wrong. Lane is "".
	RateOvershoots, CapacityOvershoots []Finding
}

// inversionsOf counts the inversions ($1 room, $2 epoch, $3 arrival, $4
// lane) the admitted entry forms: Applied.Inversions. Two index range
// scans of admitted entries of the lane (migration 00002), each empty in a
// lane admitted in order and applied in stream order: later arrivals by
// arrival, later admissions by admission number ("+ 0" keeps the planner
// off the other index, whose range is every earlier admission: 15,000 rows
// per check at the end of a 20,000-buyer sale).
const inversionsOf = `
WITH z AS (
    SELECT arrival, admission_no FROM journal_entries
    WHERE room = $1 AND epoch = $2 AND arrival = $3 AND admission_no IS NOT NULL
), cut AS (
    SELECT CASE WHEN $4 <> 'public' OR NOT EXISTS (SELECT 1 FROM journal_room_events WHERE room = $1
            AND epoch = $2 AND kind = 'config' AND detail->>'prequeue' = 'shuffle') THEN 0
        ELSE COALESCE((SELECT max((detail->>'lottery_cutoff')::bigint) FROM journal_room_events
            WHERE room = $1 AND epoch = $2 AND kind = 'config' AND detail->>'lottery_cutoff' ~ '^[0-9]{1,18}$'),
            9223372036854775807) END AS c
)
SELECT COALESCE((SELECT
    (SELECT count(*) FROM journal_entries x WHERE x.room = $1 AND x.epoch = $2 AND x.lane = $4
        AND x.admission_no IS NOT NULL AND x.arrival > z.arrival AND x.admission_no + 0 < z.admission_no
        AND x.arrival > cut.c) +
    (SELECT count(*) FROM journal_entries x WHERE x.room = $1 AND x.epoch = $2 AND x.lane = $4
        AND x.admission_no IS NOT NULL AND x.arrival + 0 < z.arrival AND x.admission_no > z.admission_no
        AND z.arrival > cut.c)
    FROM z, cut), 0)`

// limitAt is the room's ($1, epoch $2) config field %s at $3: the last
// config event at or before it (none journaled: NULL, no limit known).
const limitAt = `(SELECT (detail->>'%[1]s')::bigint FROM journal_room_events
        WHERE room = $1 AND epoch = $2 AND kind = 'config' AND at_ms <= $3::bigint AND detail->>'%[1]s' ~ '^[0-9]{1,18}$'
        ORDER BY at_ms DESC, length(stream_id) DESC, stream_id DESC LIMIT 1)`

// overshoots are the room's ($1, epoch $2) journaled admissions at $3
// beyond its rate (in ($3 − 60 s, $3]) and beyond its capacity (live at
// $3): Applied.RateOvershoots, CapacityOvershoots. Index range scans of the
// admissions of the last minute and of the last session (migration 00002).
var overshoots = `
SELECT GREATEST(0, (SELECT count(*) FROM journal_entries WHERE room = $1 AND epoch = $2
            AND admitted_ms > $3::bigint - 60000 AND admitted_ms <= $3::bigint) - ` + fmt.Sprintf(limitAt, "rate") + `),
       GREATEST(0, (SELECT count(*) FROM journal_entries WHERE room = $1 AND epoch = $2
            AND admitted_ms <= $3::bigint AND admitted_ms > $3::bigint - (SELECT min((detail->>'session_ms')::bigint)
                FROM journal_room_events WHERE room = $1 AND epoch = $2 AND kind = 'config' AND at_ms <= $3::bigint
                AND detail->>'session_ms' ~ '^[0-9]{1,18}$')
            AND (ended_ms IS NULL OR ended_ms > $3::bigint)) - ` + fmt.Sprintf(limitAt, "capacity") + `)`

// ApplyWaits is Apply, and reports the waits it completed: one Wait for each
// entered or admitted event of events after whose upsert the entry's row
// holds both entered_ms and admitted_ms (RETURNING in upsertEntry), i.e.
// for whichever of the entry's two events was applied second. In
// stream order that is the admitted event; when admitted arrives first, the
// entered event. Once per entry per delivery: a redelivered entered or
// admitted event of a row that already has both reports the wait again, so
// a histogram fed from it (the consumer's flashgate_wait_seconds) may
// observe an entry twice after a retried batch. Errors: Apply's; no Wait
// is reported when the transaction fails.
func (s *Store) ApplyWaits(ctx context.Context, events []Event) ([]Wait, error) {
	a, err := s.ApplyChecked(ctx, events)
	if err != nil {
		return nil, err
	}
	return a.Waits, nil
}

// ApplyChecked is ApplyWaits, and also checks each admitted event against
// the journal written so far, in the same transaction: the inversions of
// its lane and the rate (Applied; the journal process's fairness counters).
// As with the waits, a redelivered admitted event is checked again, so a
// counter fed from it may count a finding twice (never one that is not
// there). With several journal processes a room's events may be applied out
// of stream order; a pair of admissions applied at once by two processes is
// then not compared, and an admission checked before the earlier ones of
// its 60 s were applied is checked against fewer: an inversion can be
// missed, not invented; the overshoots need every earlier event applied
// (Applied). Errors: Apply's.
func (s *Store) ApplyChecked(ctx context.Context, events []Event) (Applied, error) {
	for i := range events {
		if why := events[i].validate(); why != "" {
			return Applied{}, flashgate.Errorf(flashgate.CodeInvalidInput, "journal: event %d (%s %s): %s",
				i, events[i].Kind, events[i].ID, why)
		}
	}
	if len(events) == 0 {
		return Applied{}, nil
	}
	var out Applied
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out = Applied{}                 // BeginFunc does not retry, but stay correct if it ever did
		closing := map[[2]string]bool{} // (room, epoch) with a config event that ends a line: closeLine
		var b pgx.Batch
		checked := map[[2]string]bool{} // (epoch, at) of admitted events: overshoots
		for _, e := range events {
			if e.Kind.entry() {
				b.Queue(upsertEntry, entryArgs(e)...).QueryRow(func(row pgx.Row) error {
					var entered, admitted, estimate *int64
					if err := row.Scan(&entered, &admitted, &estimate); err != nil {
						return err
					}
					if (e.Kind == KindEntered || e.Kind == KindAdmitted) && entered != nil && admitted != nil {
						w := Wait{Room: e.Room, Epoch: e.Epoch, Arrival: e.Arrival,
							Wait: time.Duration(*admitted-*entered) * time.Millisecond, Estimate: -1}
						if estimate != nil {
							w.Estimate = time.Duration(*estimate) * time.Millisecond
						}
						out.Waits = append(out.Waits, w)
					}
					return nil
				})
				if e.Kind == KindAdmitted {
					at := [2]string{e.Epoch, strconv.FormatInt(e.At, 10)}
					queueChecks(&b, e, !checked[at], &out)
					checked[at] = true
				}
				continue
			}
			detail := e.Detail
			if detail == "" {
				detail = "{}"
			}
			b.Queue(insertRoomEvent, e.Room, e.Epoch, e.ID, string(e.Kind), e.At, e.Actor, e.Action, detail)
			if e.Kind == KindConfig && closes(detail) {
				closing[[2]string{e.Room, e.Epoch}] = true
			}
		}
		for re := range closing {
			b.Queue(closeLine, re[0], re[1])
		}
		return tx.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		return Applied{}, dbError("apply", err)
	}
	return out, nil
}

// queueChecks queues the checks of admitted event e (after its upsert):
// inversionsOf for the public and priority lanes, and with limits
// overshoots.
func queueChecks(b *pgx.Batch, e Event, limits bool, out *Applied) {
	if e.Lane == "public" || e.Lane == "priority" {
		b.Queue(inversionsOf, e.Room, e.Epoch, e.Arrival, e.Lane).QueryRow(func(row pgx.Row) error {
			f := Finding{Room: e.Room, Epoch: e.Epoch, Lane: e.Lane, Arrival: e.Arrival}
			if err := row.Scan(&f.Count); err != nil || f.Count == 0 {
				return err
			}
			out.Inversions = append(out.Inversions, f)
			return nil
		})
	}
	if !limits {
		return
	}
	b.Queue(overshoots, e.Room, e.Epoch, e.At).QueryRow(func(row pgx.Row) error {
		var rate, capacity int64
		if err := row.Scan(&rate, &capacity); err != nil {
			return err
		}
		f := Finding{Room: e.Room, Epoch: e.Epoch, Arrival: e.Arrival}
		if rate > 0 {
			f.Count = rate
			out.RateOvershoots = append(out.RateOvershoots, f)
		}
		if capacity > 0 {
			f.Count = capacity
			out.CapacityOvershoots = append(out.CapacityOvershoots, f)
		}
		return nil
	})
}

// closes reports whether a config event's detail records the end of a line
// (closed_seq > 0 and ended_ms): closeLine's input.
func closes(detail string) bool {
	var d struct {
		ClosedSeq string `json:"closed_seq"`
		EndedMs   string `json:"ended_ms"`
	}
	_ = json.Unmarshal([]byte(detail), &d)
	return d.ClosedSeq != "" && d.ClosedSeq != "0" && d.EndedMs != ""
}

// entryArgs are upsertEntry's parameters for e: the columns e's kind writes,
// NULL for the others.
func entryArgs(e Event) []any {
	str := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	at := e.At
	var entered, admitted, exchanged, ended, estimate, admno *int64
	var admission, endKind, endReason *string
	if id, ok := flashgate.ParseAdmissionID(e.AdmissionID); ok {
		admno = &id.Number
	}
	switch {
	case e.Kind == KindEntered:
		entered = &at
		if e.EstimatedWait != nil {
			ms := e.EstimatedWait.Milliseconds()
			estimate = &ms
		}
	case e.Kind == KindAdmitted:
		admitted, admission = &at, str(e.AdmissionID)
	case e.Kind == KindExchanged:
		exchanged, admission = &at, str(e.AdmissionID)
	case e.Kind.ends():
		k := string(e.Kind)
		ended, endKind, endReason = &at, &k, str(e.Reason)
	}
	return []any{e.Room, e.Epoch, e.Arrival, str(e.User), str(e.Lane), entered, admitted,
		admission, exchanged, ended, endKind, endReason, estimate, admno}
}

// Entry is what the journal knows of one entry. A zero time means that
// change has not been journaled (it has not happened, or its event has not
// arrived yet).
type Entry struct {
	Room    string
	Epoch   string
	Arrival int64
	User    string // "" until an event naming the user arrives
	Lane    string // public, priority, bypass; "" unknown

	EnteredAt   time.Time // millisecond precision, the room's clock
	AdmittedAt  time.Time
	AdmissionID string // the jti; "" until admitted
	ExchangedAt time.Time
	EndedAt     time.Time
	End         Kind   // completed, revoked, expired, left, closed; "" while live
	EndReason   string // e.g. not_claimed, sold_out; "" when the end has none
}

// Completed reports whether the entry's admission was consumed by an order.
func (e Entry) Completed() bool { return e.End == KindCompleted }

// Entries returns every journaled entry of user in room, newest first (by
// epoch, then arrival number). Empty, not an error, when there is none.
func (s *Store) Entries(ctx context.Context, room, user string) ([]Entry, error) {
	rows, err := s.pool.Query(ctx, `
SELECT room, epoch, arrival, COALESCE(user_id, ''), COALESCE(lane, ''), entered_ms, admitted_ms,
       COALESCE(admission_id, ''), exchanged_ms, ended_ms, COALESCE(end_kind, ''), COALESCE(end_reason, '')
FROM journal_entries
WHERE room = $1 AND user_id = $2
ORDER BY length(epoch) DESC, epoch DESC, arrival DESC`, room, user)
	if err != nil {
		return nil, dbError("query", err)
	}
	out, err := pgx.CollectRows(rows, scanEntry)
	if err != nil {
		return nil, dbError("query", err)
	}
	return out, nil
}

// Entry returns user's newest journaled entry in room: when they entered,
// were admitted, with which admission id, whether they completed and why the
// entry ended. Errors: none journaled (CodeNotFound), PostgreSQL unreachable
// (CodeUnavailable).
func (s *Store) Entry(ctx context.Context, room, user string) (Entry, error) {
	es, err := s.Entries(ctx, room, user)
	if err != nil {
		return Entry{}, err
	}
	if len(es) == 0 {
		return Entry{}, flashgate.Errorf(flashgate.CodeNotFound, "journal: no entry of user %q in room %q", user, room)
	}
	return es[0], nil
}

func ms(v *int64) time.Time {
	if v == nil {
		return time.Time{}
	}
	return time.UnixMilli(*v)
}

// dbError classifies a pgx error: PostgreSQL rejected the statement
// (CodeInternal: a bug or a schema mismatch) or could not be reached
// (CodeUnavailable: retry later).
func dbError(op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return &flashgate.Error{Code: flashgate.CodeInternal, Message: "journal: " + op, Err: err}
	}
	return &flashgate.Error{Code: flashgate.CodeUnavailable, Message: "journal: " + op, Err: err}
}
