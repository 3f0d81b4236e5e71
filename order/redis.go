package order

import (
	"context"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/verifier"
)

// Config configures NewRedis. The zero value (or nil) is a safe default.
type Config struct {
	// CompletionReplicas, when > 0, makes Complete wait (Redis WAIT) until
	// that many replicas acknowledged the completion, for at most
	// CompletionTimeout (0: 200 ms), and fail closed with
	// flashgate.ErrUnavailable otherwise, so a Sentinel failover cannot lose
	// an acknowledged completion (docs/operations.md#failure-modes). Not on Cluster
	// (WAIT is per node): NewRedis refuses the combination.
	CompletionReplicas int
	CompletionTimeout  time.Duration
	// Now, when set, replaces the room's clock (Redis TIME) in the completion
	// and active checks (tests). Nil: Redis TIME, the clock every issuer
	// replica uses, never this pod's.
	Now func() time.Time
}

// Redis completes and checks admissions in the issuer's Redis. Safe for
// concurrent use.
type Redis struct {
	a *issuer.Admissions
}

// NewRedis returns the order side over rdb (a *redis.Client,
// *redis.ClusterClient or failover client pointed at the issuer's Redis).
// Errors: flashgate.ErrInvalidInput for an invalid Config (replicas on a
// Cluster client, or on a client without Pipeline); CompletionReplicas <= 0
// means no WAIT.
func NewRedis(rdb issuer.Redis, cfg *Config) (*Redis, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	// The admission role of the issuer: the completion and active scripts,
	// with no waiting secret, signer or tick loop.
	a, err := issuer.NewAdmissions(rdb, issuer.AdmissionsConfig{CompletionReplicas: cfg.CompletionReplicas,
		CompletionTimeout: cfg.CompletionTimeout, Now: cfg.Now})
	if err != nil {
		return nil, err
	}
	return &Redis{a: a}, nil
}

// Complete consumes the admission behind tok (room = tok.Product, user =
// tok.User, admission id = tok.ID). Errors: flashgate.ErrExpired,
// ErrRevoked, ErrNotFound (unknown, left, or from before a data loss),
// ErrOwnerMismatch, ErrRoomStopped (admitted before an operator's stop:
// issuer.Stop, refused at once), ErrUnknownRoom, ErrInvalidInput, and ErrUnavailable when
// Redis cannot answer or too few replicas acknowledged: completion fails
// closed, and a retry returns the first result.
func (r *Redis) Complete(ctx context.Context, tok *verifier.Token) (*flashgate.Completion, error) {
	return r.a.Complete(ctx, tok.Product, tok.User, tok.ID)
}

// CheckActive returns nil while the admission behind tok is live by the
// room's clock, and otherwise flashgate.ErrNotFound (revoked, completed,
// left, or expired and dropped), flashgate.ErrExpired (lapsed, not yet
// dropped), flashgate.ErrRoomStopped (admitted before an operator's stop),
// or flashgate.ErrUnavailable when Redis cannot answer (fail
// closed). One read-only script call.
func (r *Redis) CheckActive(ctx context.Context, tok *verifier.Token) error {
	return r.a.CheckActive(ctx, tok.Product, tok.ID)
}
