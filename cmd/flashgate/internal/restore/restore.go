// Package restore rebuilds a room lost with Redis's data from the journal in
// PostgreSQL (docs/operations.md#restoring-a-room): it reads the room's newest line
// with journal.Store.RoomState and writes it with issuer.Restore. It is the
// body of `flashgate restore`, kept out of cmd/ (wiring only) so tests can
// drive it against real servers.
package restore

import (
	"context"
	"time"

	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/journal"
)

// State converts the journal's view of a room into what issuer.Restore
// writes (same fields; times stay millisecond times).
func State(js journal.RoomState) issuer.RestoreState {
	st := issuer.RestoreState{Epoch: js.Epoch, Config: js.Config, MaxArrival: js.MaxArrival,
		MaxAdmission: js.MaxAdmission, Stats: js.Stats, PreQueueBefore: js.PreQueueBefore,
		Clock: time.UnixMilli(max(js.MaxAt, js.ConfigAt))}
	st.Entries = make([]issuer.RestoreEntry, len(js.Entries))
	for i, e := range js.Entries {
		st.Entries[i] = issuer.RestoreEntry{Arrival: e.Arrival, User: e.User, Lane: e.Lane,
			AdmissionID: e.AdmissionID, EnteredAt: e.EnteredAt, AdmittedAt: e.AdmittedAt,
			ExchangedAt: e.ExchangedAt, EndedAt: e.EndedAt, End: string(e.End), EndReason: e.EndReason}
	}
	return st
}

// Plan reads room's newest line from the journal (what Room would write),
// with now as the room's clock for the ended-records horizon. Errors:
// journal.Store.RoomState's.
func Plan(ctx context.Context, store *journal.Store, room string, now time.Time) (issuer.RestoreState, error) {
	js, err := store.RoomState(ctx, room, now)
	if err != nil {
		return issuer.RestoreState{}, err
	}
	return State(js), nil
}

// Room restores room into rdb from the journal: Plan, then issuer.Restore.
// Errors: Plan's (flashgate.ErrNotFound: nothing journaled), issuer.Restore's
// (flashgate.ErrRoomNotEmpty: the room has entries in Redis; nothing is
// written).
func Room(ctx context.Context, store *journal.Store, rdb issuer.Redis, room string, now time.Time) (issuer.RestoreResult, error) {
	st, err := Plan(ctx, store, room, now)
	if err != nil {
		return issuer.RestoreResult{}, err
	}
	return issuer.Restore(ctx, rdb, room, st, now)
}
