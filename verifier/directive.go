package verifier

import (
	"context"
	"fmt"
)

// Directives is an optional source of per-room edge directives (the
// issuer's /.well-known/flashgate-directives.json; docs/rooms.md "Stopping a
// sale at the edge"). Implementations: remote.Directives in package
// verifier/remote (fetched, cached for the document's max-age).
//
// NotBefore returns the room's not_before in Unix seconds — the unit of
// the token's iat: tokens of room with iat < not_before are refused
// (ErrRoomStopped). It returns 0 when the document holds nothing for
// room (no stop), and ErrDirectivesUnavailable (possibly wrapped) when it
// has no document to answer from (never fetched): Verify then refuses,
// never lets the token through unchecked.
type Directives interface {
	NotBefore(ctx context.Context, room string) (int64, error)
}

// CheckNotBefore is the directive rule as a pure function: a token issued
// at iat (Unix seconds) is refused with ErrRoomStopped (wrapped) when
// iat < notBefore (Unix seconds; 0 or less: no stop), else nil. Hosts
// that fetch the directive themselves (the JavaScript package) apply the
// same comparison.
func CheckNotBefore(iat, notBefore int64) error {
	if iat < notBefore {
		return fmt.Errorf("%w: iat %d < not_before %d", ErrRoomStopped, iat, notBefore)
	}
	return nil
}

// checkDirective is Verify's step 14 for a token t that passed steps 1–13.
func (v *Verifier) checkDirective(ctx context.Context, t *Token) error {
	nb, err := v.directives.NotBefore(ctx, t.Product)
	if err != nil {
		if !isVerifierError(err) {
			return fmt.Errorf("%w: %v", ErrDirectivesUnavailable, err)
		}
		return err
	}
	return CheckNotBefore(t.IssuedAt.Unix(), nb)
}
