package issuer

import (
	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer/store"
)

// ErrNotMinted is CompleteMinted's answer for a token that is not, byte for
// byte, one this issuer noted when it minted it (Exchange): nothing was read
// or changed, and the caller verifies the token's signature and calls
// Complete instead. It is not a flashgate.Error: it never reaches a client.
var ErrNotMinted = store.ErrNotMinted // the complete script's not_minted (issuer/store)

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
