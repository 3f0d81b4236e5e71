package verifier

import "errors"

// Code names why a token was refused. Codes are stable: the wasm ABI
// (wasm/README.md) returns them as integers and the CLI prints their names,
// so never renumber an existing code; append new ones.
type Code uint8

// The result codes. CodeOK means the token was accepted.
const (
	CodeOK                    Code = iota // accepted
	CodeTooLarge                          // raw token longer than MaxTokenSize
	CodeMalformed                         // not compact JWS: segments, base64url, JSON shape
	CodeDuplicateKey                      // a JSON member name repeats in header or payload
	CodeUnsupportedAlg                    // alg is not the algorithm of the key (EdDSA), incl. "none"
	CodeForbiddenHeader                   // jwk, jku, x5u, x5c, crit or b64 header present
	CodeBadType                           // typ header is not the admission-token type
	CodeUnknownKey                        // kid missing, not a string, or names no known key
	CodeBadSignature                      // signature does not verify (wrong length included)
	CodeBadIssuer                         // iss missing, not a string, or not the expected issuer
	CodeBadAudience                       // aud missing, not a string, or not the expected audience
	CodeBadProduct                        // product claim missing or not the expected product
	CodeBadUser                           // sub missing, not a string, or not the expected user
	CodeInvalidClaims                     // exp/iat/nbf/jti missing or of the wrong type
	CodeExpired                           // now >= exp + leeway
	CodeNotYetValid                       // iat or nbf later than now + leeway
	CodeLifetimeTooLong                   // exp - iat exceeds the maximum lifetime
	CodeUnavailable                       // key set could not be fetched (remote JWKS down)
	CodeRoomStopped                       // iat before the room's edge directive not_before (an operator's stop)
	CodeDirectivesUnavailable             // edge directives configured but never fetched: refused, not let through
	codeCount
)

var codeNames = [codeCount]string{
	CodeOK:              "ok",
	CodeTooLarge:        "too_large",
	CodeMalformed:       "malformed",
	CodeDuplicateKey:    "duplicate_key",
	CodeUnsupportedAlg:  "unsupported_alg",
	CodeForbiddenHeader: "forbidden_header",
	CodeBadType:         "bad_type",
	CodeUnknownKey:      "unknown_key",
	CodeBadSignature:    "bad_signature",
	CodeBadIssuer:       "bad_issuer",
	CodeBadAudience:     "bad_audience",
	CodeBadProduct:      "bad_product",
	CodeBadUser:         "bad_user",
	CodeInvalidClaims:   "invalid_claims",
	CodeExpired:         "expired",
	CodeNotYetValid:     "not_yet_valid",
	CodeLifetimeTooLong: "lifetime_too_long",
	CodeUnavailable:     "keys_unavailable",
	CodeRoomStopped:     "room_stopped",

	CodeDirectivesUnavailable: "directives_unavailable",
}

// String returns the code's stable snake_case name, e.g. "expired".
func (c Code) String() string {
	if c < codeCount {
		return codeNames[c]
	}
	return "unknown"
}

// Error is the type of every sentinel error below. Compare with errors.Is
// against the sentinels; details are added by wrapping (fmt.Errorf("%w: …")).
type Error struct {
	code Code
	msg  string
}

func (e *Error) Error() string { return "verifier: " + e.msg }

// Code returns the error's result code.
func (e *Error) Code() Code { return e.code }

// Sentinel errors, one per verifier rule (docs/DESIGN.md#tokens, its verifier rules).
var (
	ErrTooLarge        = &Error{CodeTooLarge, "token larger than 4 KiB"}
	ErrMalformed       = &Error{CodeMalformed, "malformed token"}
	ErrDuplicateKey    = &Error{CodeDuplicateKey, "duplicate JSON member name"}
	ErrUnsupportedAlg  = &Error{CodeUnsupportedAlg, "unsupported alg (want EdDSA)"}
	ErrForbiddenHeader = &Error{CodeForbiddenHeader, "forbidden header parameter"}
	ErrBadType         = &Error{CodeBadType, "wrong typ"}
	ErrUnknownKey      = &Error{CodeUnknownKey, "unknown kid"}
	ErrBadSignature    = &Error{CodeBadSignature, "invalid signature"}
	ErrBadIssuer       = &Error{CodeBadIssuer, "wrong issuer"}
	ErrBadAudience     = &Error{CodeBadAudience, "wrong audience"}
	ErrBadProduct      = &Error{CodeBadProduct, "wrong product"}
	ErrBadUser         = &Error{CodeBadUser, "wrong user"}
	ErrInvalidClaims   = &Error{CodeInvalidClaims, "invalid claims"}
	ErrExpired         = &Error{CodeExpired, "token expired"}
	ErrNotYetValid     = &Error{CodeNotYetValid, "token not yet valid"}
	ErrLifetimeTooLong = &Error{CodeLifetimeTooLong, "token lifetime exceeds maximum"}
	ErrUnavailable     = &Error{CodeUnavailable, "key set unavailable"}
	ErrRoomStopped     = &Error{CodeRoomStopped, "room stopped: token issued before the room's not_before"}
	// ErrDirectivesUnavailable: a Directives source has no directive
	// document yet (never fetched). Verify refuses rather than accept a
	// token it cannot check against a stop.
	ErrDirectivesUnavailable = &Error{CodeDirectivesUnavailable, "edge directives unavailable"}
)

// CodeOf returns the result code of err: CodeOK for nil, the code of the
// wrapped *Error, or CodeMalformed for any other error.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.code
	}
	return CodeMalformed
}
