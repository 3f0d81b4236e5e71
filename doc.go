// Package flashgate is the domain vocabulary every flashgate package shares:
// the states a client can see of its entry, the error codes and Error, the
// admission id (the admission token's jti) and its codec, the result of a
// completion, and the admission token's claims and protected header.
//
// It is the leaf of the module's import graph: standard library only, no
// Redis and no HTTP. issuer (the queue over Redis), server (the HTTP API),
// order (the order side) and the simulator import it; it imports none of
// them. The verifier core does not import it either — it must compile with
// TinyGo on its own — and keeps its own copy of the token profile's
// constants, which a test holds equal to TokenType and friends here.
//
// Vocabulary and invariants: docs/concepts.md#what-flashgate-is; the HTTP form of every code: package
// problem.
package flashgate
