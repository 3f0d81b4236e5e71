// Package order is flashgate's order side: what an order service does with an
// admission token that verifier.Verify has accepted, at the two moments
// the design allows a round trip to the queue (docs/concepts.md#what-flashgate-is):
//
//   - Complete consumes the admission when the order goes through: still
//     active and unexpired → consumed; a retry returns the first result
//     (Repeated); expired, revoked, left or unknown → refused. Replay
//     protection keys on (product, jti), never on the token string.
//   - CheckActive asks whether the admission is still live, for services that
//     must honour revocations before completion.
//
// Two implementations: Redis (the issuer's Redis, one script call; for order
// pods inside the queue's network) and HTTP (the issuer's POST /v1/complete;
// for pods that have no Redis access). Both answer with flashgate's domain
// errors (flashgate.ErrExpired, flashgate.ErrRevoked, flashgate.ErrNotFound,
// flashgate.ErrOwnerMismatch, flashgate.ErrUnavailable, …): compare with
// errors.Is, and answer HTTP clients through package problem.
//
// A pod that only verifies needs neither: it imports verifier and
// verifier/remote (the issuer's JWKS over HTTP), both standard library only.
package order

import (
	"context"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/verifier"
)

// Completer consumes verified admissions. *Redis and *HTTP implement it.
type Completer interface {
	Complete(ctx context.Context, tok *verifier.Token) (*flashgate.Completion, error)
}
