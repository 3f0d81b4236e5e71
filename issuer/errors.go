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
