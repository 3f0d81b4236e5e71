// Package redischeck is the verifier's Redis fallback, for order services
// written in Go: the two moments DESIGN.md allows a Redis round trip.
//
//   - Complete consumes an admission atomically when the order goes through
//     (still active and unexpired → consumed; a retry returns the first
//     result; expired, revoked, left or unknown → refused);
//   - CheckActive asks (one ZSCORE) whether an admission is still live, for
//     callers that must honour revocations before completion.
//
// Both take a *verifier.Token that verifier.Verify has already accepted:
// replay protection keys on (product, jti), never on the token string. It
// lives outside the verifier core because it needs go-redis, which TinyGo
// builds must not pull in.
package redischeck

import (
	"context"
	"time"

	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/verifier"
)

// Checker asks Redis about verified admissions. Safe for concurrent use.
type Checker struct {
	is *issuer.Issuer
}

// Option configures a Checker.
type Option func(*issuer.Config)

// WithCompletionReplicas makes Complete wait (Redis WAIT) until n replicas
// acknowledged the completion, for at most timeout (0: 200 ms), and fail
// closed with issuer.ErrUnavailable otherwise — so a Sentinel failover cannot
// lose an acknowledged completion (README "Failure modes"). Not on Cluster.
func WithCompletionReplicas(n int, timeout time.Duration) Option {
	return func(c *issuer.Config) { c.CompletionReplicas, c.CompletionTimeout = n, timeout }
}

// New returns a Checker over rdb (a *redis.Client, *redis.ClusterClient or
// failover client pointed at the issuer's Redis). Errors: an invalid option
// combination (CodeInvalidInput).
func New(rdb issuer.Redis, opts ...Option) (*Checker, error) {
	cfg := issuer.Config{Redis: rdb}
	for _, o := range opts {
		o(&cfg)
	}
	is, err := issuer.New(cfg)
	if err != nil {
		return nil, err
	}
	return &Checker{is: is}, nil
}

// Complete consumes the admission behind tok. Errors (compare with
// errors.Is): issuer.ErrExpired, issuer.ErrRevoked, issuer.ErrNotFound,
// issuer.ErrOwnerMismatch, issuer.ErrUnknownRoom, and issuer.ErrUnavailable
// when Redis cannot answer — completion fails closed and may be retried.
func (c *Checker) Complete(ctx context.Context, tok *verifier.Token) (*issuer.Completion, error) {
	return c.is.CompleteToken(ctx, tok)
}

// CheckActive returns nil while the admission behind tok is live, and
// issuer.ErrNotFound (revoked, completed, left), issuer.ErrExpired or
// issuer.ErrUnavailable (fail closed) otherwise.
func (c *Checker) CheckActive(ctx context.Context, tok *verifier.Token) error {
	return c.is.CheckActive(ctx, tok)
}
