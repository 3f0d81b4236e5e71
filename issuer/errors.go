package issuer

import "github.com/flashgate/flashgate"

// NotAdmittedError is Exchange's answer while the entry is still waiting: a
// flashgate.ErrNotAdmitted (errors.Is matches it) that carries the WAITING
// entry (position, poll hint), for callers that show it.
type NotAdmittedError struct {
	Err   *flashgate.Error // Code is flashgate.CodeNotAdmitted
	Entry *Entry
}

func (e *NotAdmittedError) Error() string { return e.Err.Error() }

// Unwrap returns the domain error, so errors.As(err, **flashgate.Error) and
// errors.Is(err, flashgate.ErrNotAdmitted) see it.
func (e *NotAdmittedError) Unwrap() error { return e.Err }

// scriptError maps the codes scripts return as {'ERROR', code}.
func scriptError(code, room string) error {
	switch code {
	case "unknown_room":
		return flashgate.Errorf(flashgate.CodeUnknownRoom, "unknown waiting room %q", room)
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
	}
	return flashgate.Errorf(flashgate.CodeInternal, "unexpected script result %q", code)
}
