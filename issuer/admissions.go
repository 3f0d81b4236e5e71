package issuer

import (
	"context"
	"time"

	"github.com/flashgate/flashgate"
)

// AdmissionsConfig configures NewAdmissions: the few Config fields the
// completion and active checks read.
type AdmissionsConfig struct {
	// CompletionReplicas and CompletionTimeout are Config's: Complete waits
	// (Redis WAIT) for that many replicas, for at most CompletionTimeout.
	CompletionReplicas int
	CompletionTimeout  time.Duration
	// Now is Config.Now: nil means Redis TIME, the clock every issuer replica
	// uses.
	Now func() time.Time
}

// Admissions is the order side's role of the issuer: it completes admissions
// and checks that they are live, and nothing else — no waiting secret, no
// signer, no tick loop, no rooms to run (docs/architecture.md
// "Architecture"). Its answers are the Issuer's, from the same scripts.
// Safe for concurrent use.
type Admissions struct {
	is *Queue
}

// NewAdmissions returns the admission checks over rdb, the issuer's Redis.
// Errors: flashgate.ErrInvalidInput for an invalid cfg (replicas on a
// Cluster client or a client without Pipeline()), as New.
func NewAdmissions(rdb Redis, cfg AdmissionsConfig) (*Admissions, error) {
	is, err := New(Config{Redis: rdb, CompletionReplicas: cfg.CompletionReplicas,
		CompletionTimeout: cfg.CompletionTimeout, Now: cfg.Now})
	if err != nil {
		return nil, err
	}
	return &Admissions{is: is.Queue}, nil
}

// Complete is Queue.Complete.
func (a *Admissions) Complete(ctx context.Context, room, user, admissionID string) (*flashgate.Completion, error) {
	return a.is.Complete(ctx, room, user, admissionID)
}

// CheckActive is Queue.CheckActive.
func (a *Admissions) CheckActive(ctx context.Context, room, admissionID string) error {
	return a.is.CheckActive(ctx, room, admissionID)
}
