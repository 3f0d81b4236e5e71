package journal

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/jackc/pgx/v5"
)

// RoomState is what the journal knows of a room's newest line: what
// `flashgate restore` (issuer.Restore) writes back into an empty Redis.
type RoomState struct {
	Room string
	// Epoch is the room's newest journaled epoch: of the epochs with journaled
	// entries, the one created last (epochs are Redis TIME in µs, base36, so
	// a longer one is newer and equal lengths compare as strings).
	Epoch string
	// Config is the detail of the room's newest config room event of Epoch
	// (by at_ms, then stream id; of any epoch when Epoch has none: not the
	// config of a room recreated empty after the loss, whose lottery seed,
	// cutoff and end are not the line's): the config hash as the scripts held it,
	// field → value, all strings (docs/operations.md#redis-data-model, KEYS[1]).
	// ConfigAt is that event's time (ms since 1970).
	Config   map[string]string
	ConfigAt int64
	// Entries are the epoch's entries that have not ended, and those that
	// ended at or after Horizon (the ended records the scripts still keep:
	// max(2 × session, 10 min) before now, tick.lua), in arrival order.
	Entries []Entry
	// Horizon is the oldest end kept (ms since 1970).
	Horizon int64
	// MaxArrival is the epoch's highest arrival number (the seq counter);
	// MaxAdmission the highest admission number (the third part of an
	// admission id, the admno counter); MaxAt the latest time any of the
	// epoch's entry events carries (ms).
	MaxArrival, MaxAdmission, MaxAt int64
	// Stats are the room's counters as the scripts keep them in the stats
	// hash (KEYS[9]), counted over the whole epoch: admitted,
	// priority_admitted, bypassed, completed, revoked (admissions revoked),
	// removed (waiting entries a ban removed), expired, not_claimed, left,
	// closed_out (entries a closed line dropped), first_admit_ms (0: none).
	Stats map[string]int64
	// PreQueueBefore counts the epoch's entries with an arrival number up to
	// the lottery's cutoff (0 without a drawn lottery): an upper bound of
	// the stats' drawn.
	PreQueueBefore int64
}

// RoomState reads room's newest line from the journal (see RoomState).
// now (the room's clock) sets the ended-records horizon. Errors: the room has
// no journaled config or no journaled entry (CodeNotFound), a config detail
// that is not an object of strings (CodeInternal), PostgreSQL unreachable
// (CodeUnavailable).
func (s *Store) RoomState(ctx context.Context, room string, now time.Time) (RoomState, error) {
	st := RoomState{Room: room}
	err := s.pool.QueryRow(ctx, `
SELECT epoch FROM journal_entries WHERE room = $1
ORDER BY length(epoch) DESC, epoch DESC LIMIT 1`, room).Scan(&st.Epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, flashgate.Errorf(flashgate.CodeNotFound, "journal: no entry of room %q journaled", room)
	}
	if err != nil {
		return st, dbError("query", err)
	}
	var detail []byte
	err = s.pool.QueryRow(ctx, `
SELECT detail, at_ms FROM journal_room_events
WHERE room = $1 AND kind = 'config'
ORDER BY epoch = $2 DESC, at_ms DESC, length(stream_id) DESC, stream_id DESC LIMIT 1`, room, st.Epoch).Scan(&detail, &st.ConfigAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, flashgate.Errorf(flashgate.CodeNotFound, "journal: no config of room %q journaled", room)
	}
	if err != nil {
		return st, dbError("query", err)
	}
	if err := json.Unmarshal(detail, &st.Config); err != nil {
		return st, &flashgate.Error{Code: flashgate.CodeInternal, Message: "journal: room config detail is not an object of strings", Err: err}
	}
	session, _ := strconv.ParseInt(st.Config["session_ms"], 10, 64)
	st.Horizon = now.UnixMilli() - max(2*session, 600_000) // tick.lua's ended-records horizon
	cutoff, _ := strconv.ParseInt(st.Config["lottery_cutoff"], 10, 64)

	var first *int64
	var admitted, prio, bypassed, completed, revoked, removed, expired, notClaimed, left, closed int64
	err = s.pool.QueryRow(ctx, `
SELECT max(arrival),
       COALESCE(max(split_part(admission_id, '.', 3)::bigint), 0),
       COALESCE(max(GREATEST(entered_ms, admitted_ms, exchanged_ms, ended_ms)), 0),
       min(admitted_ms),
       count(admitted_ms),
       count(admitted_ms) FILTER (WHERE lane = 'priority'),
       count(admitted_ms) FILTER (WHERE lane = 'bypass'),
       count(*) FILTER (WHERE end_kind = 'completed'),
       count(*) FILTER (WHERE end_kind = 'revoked' AND admission_id IS NOT NULL),
       count(*) FILTER (WHERE end_kind = 'revoked' AND admission_id IS NULL),
       count(*) FILTER (WHERE end_kind = 'expired'),
       count(*) FILTER (WHERE end_kind = 'expired' AND end_reason = 'not_claimed'),
       count(*) FILTER (WHERE end_kind = 'left'),
       count(*) FILTER (WHERE end_kind = 'closed'),
       count(*) FILTER (WHERE arrival <= $3)
FROM journal_entries WHERE room = $1 AND epoch = $2`, room, st.Epoch, cutoff).Scan(
		&st.MaxArrival, &st.MaxAdmission, &st.MaxAt, &first, &admitted, &prio, &bypassed, &completed,
		&revoked, &removed, &expired, &notClaimed, &left, &closed, &st.PreQueueBefore)
	if err != nil {
		return st, dbError("query", err)
	}
	st.Stats = map[string]int64{"admitted": admitted, "priority_admitted": prio, "bypassed": bypassed,
		"completed": completed, "revoked": revoked, "removed": removed, "expired": expired,
		"not_claimed": notClaimed, "left": left, "closed_out": closed}
	if first != nil {
		st.Stats["first_admit_ms"] = *first
	}

	rows, err := s.pool.Query(ctx, `
SELECT room, epoch, arrival, COALESCE(user_id, ''), COALESCE(lane, ''), entered_ms, admitted_ms,
       COALESCE(admission_id, ''), exchanged_ms, ended_ms, COALESCE(end_kind, ''), COALESCE(end_reason, '')
FROM journal_entries
WHERE room = $1 AND epoch = $2 AND (ended_ms IS NULL OR ended_ms >= $3)
ORDER BY arrival`, room, st.Epoch, st.Horizon)
	if err != nil {
		return st, dbError("query", err)
	}
	st.Entries, err = pgx.CollectRows(rows, scanEntry)
	if err != nil {
		return st, dbError("query", err)
	}
	return st, nil
}

// scanEntry scans a row of the columns Entries selects.
func scanEntry(r pgx.CollectableRow) (Entry, error) {
	var e Entry
	var entered, admitted, exchanged, ended *int64
	var end string
	err := r.Scan(&e.Room, &e.Epoch, &e.Arrival, &e.User, &e.Lane, &entered, &admitted,
		&e.AdmissionID, &exchanged, &ended, &end, &e.EndReason)
	e.EnteredAt, e.AdmittedAt, e.ExchangedAt, e.EndedAt = ms(entered), ms(admitted), ms(exchanged), ms(ended)
	e.End = Kind(end)
	return e, err
}
