//go:build !tinygo

package verifier

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
)

// DefaultCookie is the cookie Middleware reads when no Authorization header
// carries a bearer token.
const DefaultCookie = "flashgate_admission"

// MiddlewareOptions configures Middleware. The zero value is usable.
type MiddlewareOptions struct {
	// Cookie names the cookie holding the token; "" means DefaultCookie.
	Cookie string
	// Product returns the product the request is for; nil means Config.Product.
	Product func(*http.Request) string
	// User returns the user the request is for; nil means the user is not checked.
	User func(*http.Request) string
}

type tokenKey struct{}

// TokenFromContext returns the token Middleware stored in ctx.
func TokenFromContext(ctx context.Context) (*Token, bool) {
	t, ok := ctx.Value(tokenKey{}).(*Token)
	return t, ok && t != nil
}

// Middleware guards an http.Handler with admission-token verification.
//
// The token is taken from "Authorization: Bearer <token>" (RFC 6750 §2.1),
// else from the cookie opts.Cookie. On success the *Token is stored in the
// request context (TokenFromContext). On failure the response is an RFC 9457
// application/problem+json document with a "reason" member (Code.String())
// and the status (a request without a token gets reason "missing", type
// …/token-missing):
//
//   - 401 with "WWW-Authenticate: Bearer" when no token was sent (RFC 6750 §3.1);
//   - 403 with `Bearer error="insufficient_scope"` for bad_product and bad_user:
//     a valid token for another product or user;
//   - 503 for keys_unavailable (the key set could not be fetched; the token
//     may be fine, so the client should retry, not re-authenticate);
//   - 401 with `Bearer error="invalid_token"` for every other reason.
func Middleware(v *Verifier, opts MiddlewareOptions) func(http.Handler) http.Handler {
	cookie := opts.Cookie
	if cookie == "" {
		cookie = DefaultCookie
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			raw := bearerToken(r)
			if raw == "" {
				if c, err := r.Cookie(cookie); err == nil {
					raw = c.Value
				}
			}
			if raw == "" {
				w.Header().Set("WWW-Authenticate", "Bearer")
				writeProblem(w, http.StatusUnauthorized, "missing", "Admission token required",
					"send the admission token as a Bearer token or in the "+cookie+" cookie", "missing")
				return
			}
			var want Expect
			if opts.Product != nil {
				want.Product = opts.Product(r)
			}
			if opts.User != nil {
				want.User = opts.User(r)
			}
			tok, err := v.Verify(r.Context(), raw, want)
			if err != nil {
				code := CodeOf(err)
				status := http.StatusUnauthorized
				switch code {
				case CodeBadProduct, CodeBadUser:
					status = http.StatusForbidden
					w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope"`)
				case CodeUnavailable:
					status = http.StatusServiceUnavailable
					w.Header().Set("Retry-After", "1")
				default:
					w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
				}
				writeProblem(w, status, strings.ReplaceAll(code.String(), "_", "-"), codeTitles[code], err.Error(), code.String())
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, tok)))
		})
	}
}

// bearerToken returns the token of an "Authorization: Bearer" header
// (scheme case-insensitive), or "".
func bearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	const scheme = "bearer "
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return ""
	}
	return strings.TrimLeft(h[len(scheme):], " ")
}

var codeTitles = [codeCount]string{
	CodeTooLarge:        "Admission token too large",
	CodeMalformed:       "Malformed admission token",
	CodeDuplicateKey:    "Admission token has duplicate JSON members",
	CodeUnsupportedAlg:  "Admission token algorithm not accepted",
	CodeForbiddenHeader: "Admission token has a forbidden header",
	CodeBadType:         "Not an admission token",
	CodeUnknownKey:      "Admission token signed by an unknown key",
	CodeBadSignature:    "Admission token signature invalid",
	CodeBadIssuer:       "Admission token from another issuer",
	CodeBadAudience:     "Admission token for another audience",
	CodeBadProduct:      "Admission token for another product",
	CodeBadUser:         "Admission token for another user",
	CodeInvalidClaims:   "Admission token claims invalid",
	CodeExpired:         "Admission token expired",
	CodeNotYetValid:     "Admission token not yet valid",
	CodeLifetimeTooLong: "Admission token lifetime too long",
	CodeUnavailable:     "Signing keys unavailable",
}

// problem is an RFC 9457 problem details document.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Reason string `json:"reason"`
}

func writeProblem(w http.ResponseWriter, status int, typ, title, detail, reason string) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(problem{
		Type:   "https://flashgate.dev/problems/token-" + typ,
		Title:  title,
		Status: status,
		Detail: detail,
		Reason: reason,
	})
}
