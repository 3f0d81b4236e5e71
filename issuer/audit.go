package issuer

import (
	"context"
	"encoding/json"

	"github.com/flashgate/flashgate"
)

// Audit is one admin action as the journal records it (docs/operations.md#durability):
// who did what to a room.
type Audit struct {
	// Actor names who acted, e.g. "admin token 1a2b3c4d from 10.0.0.7"
	// (server: the admin token's fingerprint and the client address).
	Actor string
	// Action is what they did, e.g. "configure", "pause", "sold-out",
	// "revoke", "ban", "invites", "delete".
	Action string
	// Detail is the action's arguments, a JSON object (nil: {}); it must
	// not hold secrets.
	Detail json.RawMessage
}

// JournalAudit appends a to room's journal stream (fg:{room}:journal) as an
// event of kind audit, stamped with the room's epoch and clock, so the admin
// action outlives Redis with the rest of the journal. An unknown room, or
// one whose journal is off (journal_maxlen 0), journals nothing: it
// returns false, nil. Errors: flashgate.ErrInvalidInput (room, or a Detail
// that is not a JSON object), flashgate.ErrUnavailable,
// flashgate.ErrStoreFull.
func (is *Admin) JournalAudit(ctx context.Context, room string, a Audit) (bool, error) {
	return is.journalAudit(ctx, room, a)
}

// journalAudit is JournalAudit for every role (the receipts journal the
// lottery commitment an enter created).
func (is *core) journalAudit(ctx context.Context, room string, a Audit) (bool, error) {
	if err := checkRoom(room); err != nil {
		return false, err
	}
	detail := ""
	if len(a.Detail) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(a.Detail, &obj); err != nil || obj == nil {
			return false, flashgate.Errorf(flashgate.CodeInvalidInput, "audit detail is not a JSON object")
		}
		detail = string(a.Detail)
	}
	return is.db.Audit(ctx, room, a.Actor, a.Action, detail)
}
