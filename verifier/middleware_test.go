package verifier_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/testkit"
	"github.com/flashgate/flashgate/internal/testing/tokencases"
	"github.com/flashgate/flashgate/verifier"
)

func TestMiddleware(t *testing.T) {
	set := buildSet(t)
	c := set.Cases[0]
	v := tokencases.Verifier(t, set, set.Config(c))

	var seen *verifier.Token
	h := verifier.Middleware(v, verifier.MiddlewareOptions{
		Product: func(r *http.Request) string { return r.URL.Query().Get("product") },
		User:    func(r *http.Request) string { return r.Header.Get("X-User") },
	})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := verifier.TokenFromContext(r.Context())
		require.True(t, ok)
		seen = tok
		w.WriteHeader(http.StatusNoContent)
	}))

	expiredTok := (&testkit.Signer{Kid: set.CurrentKID, Key: set.Current}).Sign(flashgate.NewClaims(
		tokencases.Issuer, "orders", "user-12345", "sku-1", "j",
		time.Unix(tokencases.IssuedAt-600, 0), time.Unix(tokencases.IssuedAt-300, 0)))

	type want struct {
		status int
		reason string
		auth   string
	}
	for _, tc := range []struct {
		name   string
		setup  func(r *http.Request)
		target string
		want   want
	}{
		{"missing token", func(r *http.Request) {}, "/?product=sku-1", want{401, "missing", "Bearer"}},
		{"bearer ok", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+set.Valid) }, "/?product=sku-1", want{204, "", ""}},
		{"bearer lower-case scheme", func(r *http.Request) { r.Header.Set("Authorization", "bearer "+set.Valid) }, "/?product=sku-1", want{204, "", ""}},
		{"cookie ok", func(r *http.Request) {
			r.AddCookie(&http.Cookie{Name: verifier.DefaultCookie, Value: set.Valid})
		}, "/?product=sku-1", want{204, "", ""}},
		{"user ok", func(r *http.Request) {
			r.Header.Set("Authorization", "Bearer "+set.Valid)
			r.Header.Set("X-User", tokencases.User)
		}, "/?product=sku-1", want{204, "", ""}},
		{"bad product 403", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+set.Valid) }, "/?product=sku-2",
			want{403, "bad_product", `Bearer error="insufficient_scope"`}},
		{"bad user 403", func(r *http.Request) {
			r.Header.Set("Authorization", "Bearer "+set.Valid)
			r.Header.Set("X-User", "someone-else")
		}, "/?product=sku-1", want{403, "bad_user", `Bearer error="insufficient_scope"`}},
		{"expired 401", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+expiredTok) }, "/?product=sku-1",
			want{401, "expired", `Bearer error="invalid_token"`}},
		{"malformed 401", func(r *http.Request) { r.Header.Set("Authorization", "Bearer x.y") }, "/?product=sku-1",
			want{401, "malformed", `Bearer error="invalid_token"`}},
		{"basic auth is no token", func(r *http.Request) { r.Header.Set("Authorization", "Basic dXNlcjpwdw==") }, "/?product=sku-1",
			want{401, "missing", "Bearer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen = nil
			r := httptest.NewRequest(http.MethodGet, tc.target, nil)
			tc.setup(r)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			require.Equal(t, tc.want.status, w.Code, w.Body.String())
			if tc.want.status == 204 {
				require.NotNil(t, seen)
				require.Equal(t, tokencases.User, seen.User)
				require.Equal(t, tokencases.JTI, seen.ID)
				return
			}
			require.Nil(t, seen)
			require.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
			require.Equal(t, "no-store", w.Header().Get("Cache-Control"))
			require.Equal(t, tc.want.auth, w.Header().Get("WWW-Authenticate"))
			var p map[string]any
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
			require.Equal(t, tc.want.reason, p["reason"])
			require.Equal(t, float64(tc.want.status), p["status"])
			require.NotEmpty(t, p["title"])
			require.NotEmpty(t, p["detail"])
			require.Equal(t, "https://flashgate.dev/problems/token-"+dashes(tc.want.reason), p["type"])
		})
	}

	_, ok := verifier.TokenFromContext(httptest.NewRequest("GET", "/", nil).Context())
	require.False(t, ok)
}

func TestMiddlewareDefaults(t *testing.T) {
	set := buildSet(t)
	cfg := set.Config(set.Cases[0])
	cfg.Product = tokencases.Product // nil opts.Product → Config.Product
	v := tokencases.Verifier(t, set, cfg)
	h := verifier.Middleware(v, verifier.MiddlewareOptions{Cookie: "adm"})(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	r := httptest.NewRequest("GET", "/", nil)
	r.AddCookie(&http.Cookie{Name: "adm", Value: set.Valid})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	require.Equal(t, 200, w.Code)

	// Key set down → 503, not 401.
	v2, err := verifier.New(failingKeys{verifier.ErrUnavailable}, cfg)
	require.NoError(t, err)
	h2 := verifier.Middleware(v2, verifier.MiddlewareOptions{})(http.NotFoundHandler())
	r = httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+set.Valid)
	w = httptest.NewRecorder()
	h2.ServeHTTP(w, r)
	require.Equal(t, 503, w.Code)
	require.Contains(t, w.Body.String(), `"reason":"keys_unavailable"`)
}

func dashes(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == '_' {
			b[i] = '-'
		}
	}
	return string(b)
}
