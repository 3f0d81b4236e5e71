package store

import (
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate"
)

// ErrNotMinted is the complete script's not_minted answer (issuer.ErrNotMinted).
var ErrNotMinted = errors.New("issuer: admission token not known as minted here; verify its signature")

// ErrRoomDeleted is the cause of the flashgate.ErrUnknownRoom an enter into
// a deleted room answers (its keys not expired yet): no auto room slot is
// reserved for it.
var ErrRoomDeleted = errors.New("room deleted")

// Unavailable maps a failed Redis call: an OOM refusal (used memory over
// maxmemory; Redis refuses a script whose first write would allocate, and
// deny-oom commands) to flashgate.ErrStoreFull, a script's RESTORING
// refusal (the room is mid-restore) to flashgate.ErrRoomLost, anything else
// to flashgate.ErrUnavailable.
func Unavailable(err error) error {
	if redis.HasErrorPrefix(err, "RESTORING") { // lua/prelude_config.lua load_config: restore.lua is mid-way
		return &flashgate.Error{Code: flashgate.CodeRoomLost, Message: "waiting room being restored from the journal; retry"}
	}
	if redis.HasErrorPrefix(err, "OOM") {
		return &flashgate.Error{Code: flashgate.CodeStoreFull, Message: "queue store full (Redis maxmemory): no new entries until memory is freed", Err: err}
	}
	return &flashgate.Error{Code: flashgate.CodeUnavailable, Message: "queue store unavailable", Err: err}
}

// ScriptError maps the codes scripts return as {'ERROR', code} for room.
func ScriptError(code, room string) error {
	switch code {
	case "unknown_room":
		return flashgate.Errorf(flashgate.CodeUnknownRoom, "unknown waiting room %q", room)
	case "room_deleted":
		return &flashgate.Error{Code: flashgate.CodeUnknownRoom, Err: ErrRoomDeleted,
			Message: fmt.Sprintf("unknown waiting room %q: it was deleted", room)}
	case "room_closed":
		return flashgate.Errorf(flashgate.CodeRoomClosed, "waiting room %q is closed", room)
	case "not_found":
		return flashgate.Errorf(flashgate.CodeNotFound, "admission not found in room %q", room)
	case "stale":
		return flashgate.Errorf(flashgate.CodeNotFound, "admission from an earlier epoch of room %q: it was lost when the queue store lost its data; queue again", room)
	case "expired":
		return flashgate.Errorf(flashgate.CodeExpired, "admission expired")
	case "revoked":
		return flashgate.Errorf(flashgate.CodeRevoked, "admission revoked")
	case "completed":
		return flashgate.Errorf(flashgate.CodeCompleted, "admission already completed")
	case "owner_mismatch":
		return flashgate.Errorf(flashgate.CodeOwnerMismatch, "admission belongs to another user")
	case "room_stopped":
		return flashgate.Errorf(flashgate.CodeRoomStopped, "admission issued before an operator's stop of room %q", room)
	case "not_minted":
		return ErrNotMinted
	case "invite_used":
		return flashgate.Errorf(flashgate.CodeInviteUsed, "the invite was already used (it is single use)")
	case "invite_expired":
		return flashgate.Errorf(flashgate.CodeInviteExpired, "the invite has expired")
	case "room_not_empty":
		return flashgate.Errorf(flashgate.CodeRoomNotEmpty, "room %q has entries in the queue store: restore refuses to write over them", room)
	case "not_restoring":
		return flashgate.Errorf(flashgate.CodeInternal, "room %q is not being restored (its restore was not begun, or begun from another epoch)", room)
	}
	return flashgate.Errorf(flashgate.CodeInternal, "unexpected script result %q", code)
}
