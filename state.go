package flashgate

import "time"

// State is what a client can see of its entry (docs/concepts.md#what-flashgate-is, vocabulary).
type State string

// Entry states.
const (
	StateWaiting   State = "WAITING"
	StateActive    State = "ACTIVE"
	StateExpired   State = "EXPIRED"
	StateCompleted State = "COMPLETED"
	StateRevoked   State = "REVOKED"
	StateNotFound  State = "NOT_FOUND"
	// StateClosed is final: the room closed (sold out, closed, its event
	// window ended, deleted) while the entry was waiting; the entry's reason
	// says which.
	StateClosed State = "CLOSED"
)

// Completion is the result of completing an admission (the order went
// through; docs/concepts.md#the-flow).
type Completion struct {
	AdmissionID string
	// CompletedAt is when the admission was consumed, millisecond precision,
	// by the room's clock (Redis TIME).
	CompletedAt time.Time
	// Repeated is true when the admission had already been completed: the
	// first completion's time is returned (idempotent under retries).
	Repeated bool
}
