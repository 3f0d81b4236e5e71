package flashgate

import (
	"errors"
	"fmt"
)

// Code is a stable, machine-readable domain error code. Package problem maps
// each code to one HTTP status and one RFC 9457 problem type; nothing else in
// flashgate turns codes into statuses.
type Code string

// The domain error codes.
const (
	CodeInvalidInput  Code = "invalid_input"         // malformed room id, user id or room config
	CodeUnknownRoom   Code = "unknown_room"          // no such waiting room and no default policy
	CodeRoomClosed    Code = "room_closed"           // the room accepts no new entries
	CodeRoomLimit     Code = "room_limit"            // an unknown room, and no more may be created (auto rooms)
	CodeBanned        Code = "banned"                // an operator banned the user from the room until a time
	CodeBadWaiting    Code = "invalid_waiting_token" // not a waiting token, or not for this room
	CodeOwnerMismatch Code = "token_owner_mismatch"  // a waiting token or admission of another user
	CodeNotFound      Code = "not_found"             // no such entry or admission
	CodeNotAdmitted   Code = "not_admitted"          // exchange asked while still waiting
	CodeExpired       Code = "expired"               // the admission lapsed
	CodeRevoked       Code = "revoked"               // an operator ended the admission
	CodeCompleted     Code = "completed"             // the admission was consumed by an order
	CodeRoomStopped   Code = "room_stopped"          // an operator's stop refuses admissions issued before the room's not_before
	CodeInviteInvalid Code = "invite_invalid"        // not an invite: malformed, another type, bad signature, unknown key, another issuer
	CodeInviteScope   Code = "invite_scope"          // a valid invite for another room or another user
	CodeInviteExpired Code = "invite_expired"        // the invite's expiry has passed (by the room's clock)
	CodeInviteUsed    Code = "invite_used"           // a single-use invite already used by someone else
	CodeJournalOff    Code = "journal_off"           // the journal (PostgreSQL) is not configured on this server
	CodeRoomNotEmpty  Code = "room_not_empty"        // restore refused: the room has entries in Redis (docs/operations.md#restoring-a-room)
	CodeUnavailable   Code = "unavailable"           // Redis unreachable or failing; retry later
	CodeStoreFull     Code = "store_full"            // Redis refuses writes for memory (maxmemory); retry later
	CodeRoomLost      Code = "room_lost"             // the room's data was lost from Redis and awaits `flashgate restore`; retry later
	CodeInternal      Code = "internal"              // a bug or misconfiguration
)

// Codes lists every domain code, in the order above.
var Codes = []Code{
	CodeInvalidInput, CodeUnknownRoom, CodeRoomClosed, CodeRoomLimit, CodeBanned, CodeBadWaiting, CodeOwnerMismatch,
	CodeNotFound, CodeNotAdmitted, CodeExpired, CodeRevoked, CodeCompleted, CodeRoomStopped,
	CodeInviteInvalid, CodeInviteScope, CodeInviteExpired, CodeInviteUsed, CodeJournalOff, CodeRoomNotEmpty, CodeUnavailable,
	CodeStoreFull, CodeRoomLost, CodeInternal,
}

// Error is a domain error. Compare with errors.Is against the sentinels below
// (comparison is by Code, so errors carrying details still match).
type Error struct {
	Code    Code
	Message string
	Err     error // cause, if any (e.g. the Redis error behind CodeUnavailable)
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same Code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels, one per Code.
var (
	ErrInvalidInput  = &Error{Code: CodeInvalidInput, Message: "invalid input"}
	ErrUnknownRoom   = &Error{Code: CodeUnknownRoom, Message: "unknown waiting room"}
	ErrRoomClosed    = &Error{Code: CodeRoomClosed, Message: "waiting room is closed"}
	ErrRoomLimit     = &Error{Code: CodeRoomLimit, Message: "too many waiting rooms"}
	ErrBanned        = &Error{Code: CodeBanned, Message: "banned from the waiting room"}
	ErrBadWaiting    = &Error{Code: CodeBadWaiting, Message: "invalid waiting token"}
	ErrOwnerMismatch = &Error{Code: CodeOwnerMismatch, Message: "token owner mismatch"}
	ErrNotFound      = &Error{Code: CodeNotFound, Message: "entry not found"}
	ErrNotAdmitted   = &Error{Code: CodeNotAdmitted, Message: "not admitted yet"}
	ErrExpired       = &Error{Code: CodeExpired, Message: "admission expired"}
	ErrRevoked       = &Error{Code: CodeRevoked, Message: "admission revoked"}
	ErrCompleted     = &Error{Code: CodeCompleted, Message: "admission already completed"}
	ErrRoomStopped   = &Error{Code: CodeRoomStopped, Message: "admission issued before an operator's stop of the room"}
	ErrInviteInvalid = &Error{Code: CodeInviteInvalid, Message: "invalid invite"}
	ErrInviteScope   = &Error{Code: CodeInviteScope, Message: "invite for another room or user"}
	ErrInviteExpired = &Error{Code: CodeInviteExpired, Message: "invite expired"}
	ErrInviteUsed    = &Error{Code: CodeInviteUsed, Message: "invite already used"}
	ErrJournalOff    = &Error{Code: CodeJournalOff, Message: "no journal configured"}
	ErrRoomNotEmpty  = &Error{Code: CodeRoomNotEmpty, Message: "room not empty"}
	ErrUnavailable   = &Error{Code: CodeUnavailable, Message: "queue store unavailable"}
	ErrStoreFull     = &Error{Code: CodeStoreFull, Message: "queue store full"}
	ErrRoomLost      = &Error{Code: CodeRoomLost, Message: "waiting room lost from the queue store, awaiting restore"}
	ErrInternal      = &Error{Code: CodeInternal, Message: "internal error"}
)

// Errorf returns an *Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns err's Code: "" for nil, CodeInternal for non-domain errors.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}
