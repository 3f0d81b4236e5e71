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
	//
	// Middleware judges exactly this string: it reads no path of its own,
	// so what it protects is the handler it wraps, for the product Product
	// names. Take it from the same routing decision that chose the handler
	// (r.PathValue under the ServeMux pattern that routes here), never by
	// parsing r.URL.Path or RawPath beside a router that reads the other:
	// then the product verified is the product served, however the path was
	// spelled (%70roducts, ..%2F, //, ;params). Taking it from r.URL.Path
	// while ServeMux routes the escaped path verifies sku-1 for
	// /products/sku-1%2F..%2Fsku-2/ and serves the segment "sku-1/../sku-2"
	// (TestMiddlewareProductFromAnotherReading). A proxy or edge in front
	// must forward the path it verified, not the client's spelling
	// (examples/cloudflare-worker/README.md#paths).
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
