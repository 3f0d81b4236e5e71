//go:build !tinygo

package verifier

import (
	"context"
	"net/http"

	"github.com/flashgate/flashgate/problem"
)

// DefaultCookie is the cookie Middleware reads when no Authorization header
// carries a bearer token.
const DefaultCookie = "flashgate_admission"

// MiddlewareOptions configures Middleware. The zero value is usable.
type MiddlewareOptions struct {
	// Cookie names the cookie holding the token; "" means DefaultCookie.
	Cookie string
	// Product returns the product the request is for; nil means Config.Product.
	// Take it from the router's own match (r.PathValue with a ServeMux
	// pattern), not by parsing r.URL.Path or RawPath: then the product
	// verified is the one the handler serves, however the path was spelled
	// (%70roducts, ..%2f, //; see examples/cloudflare-worker/README.md#paths
	// for an edge that must match prefixes itself).
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
//     may be fine, so the client should retry, not re-authenticate), and
//     for room_stopped and directives_unavailable (Config.Directives), all
//     with Retry-After;
//   - 401 with `Bearer error="invalid_token"` for every other reason.
func Middleware(v *Verifier, opts MiddlewareOptions) func(http.Handler) http.Handler {
	cookie := opts.Cookie
	if cookie == "" {
		cookie = DefaultCookie
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			raw, _ := problem.Bearer(r.Header.Get("Authorization"))
			if raw == "" {
				if c, err := r.Cookie(cookie); err == nil {
					raw = c.Value
				}
			}
			if raw == "" {
				refuse(w, "missing", "send the admission token as a Bearer token or in the "+cookie+" cookie")
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
				refuse(w, CodeOf(err).String(), err.Error())
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, tok)))
		})
	}
}

// refuse answers a refused admission token: the row problem.Token gives
// reason (status, WWW-Authenticate, Retry-After), as a document of type
// problem.Base + "token-" + reason with a "reason" member.
func refuse(w http.ResponseWriter, reason, detail string) {
	k, d := problem.TokenDetails(reason, detail)
	k.Write(w, d)
}
