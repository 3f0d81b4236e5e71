package worker_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/workerdtest"
	"github.com/flashgate/flashgate/keys"
)

// pathCase is one row of testdata/paths.json.
type pathCase struct {
	Name    string `json:"name"`
	Path    string `json:"path"`
	Want    string `json:"want"` // verify, refuse, no-product, invalid, pass
	Product string `json:"product"`
	Forward string `json:"forward"` // the request-target the origin gets (verify, pass)
}

// loadPathCases reads testdata/paths.json.
func loadPathCases(t testing.TB) []pathCase {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "paths.json"))
	require.NoError(t, err)
	var table struct {
		Prefix string     `json:"prefix"`
		Cases  []pathCase `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(raw, &table))
	require.Equal(t, "/products/", table.Prefix, "the harnesses' FLASHGATE_PRODUCT_PREFIX")
	require.NotEmpty(t, table.Cases)
	return table.Cases
}

// pathRing returns a fresh key ring and its public JWK Set.
func pathRing(t testing.TB) (*keys.Ring, []byte) {
	t.Helper()
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	jwks, err := ring.PublicJWKS()
	require.NoError(t, err)
	return ring, jwks
}

// token returns a valid admission token for the row's product, else for
// sku-2 (the product the bypass spellings aim at).
func (c pathCase) token(t testing.TB, ring *keys.Ring) string {
	product := c.Product
	if product == "" {
		product = "sku-2"
	}
	now := time.Now()
	return sign(t, ring, "alice", product, "jti-"+product, now, now.Add(5*time.Minute))
}

// muxVisit is what the ServeMux origin saw of one request.
type muxVisit struct {
	URI       string // the request-target as received
	Route     string // "product" (GET /products/{id}/…), "other", or "" (the mux answered itself, e.g. a 301)
	ID        string // PathValue("id") on the product route
	Verified  string // X-Flashgate-Product
	Responded bool
}

// muxOrigin is a Go 1.22 net/http.ServeMux shop: /products/{id}/ (and its
// subtree) is the product route, everything else the catch-all. Each request
// carries X-Test-Request, by which the visit is recorded.
type muxOrigin struct {
	srv    *httptest.Server
	mu     sync.Mutex
	visits map[string]*muxVisit
}

type visitKey struct{}

func newMuxOrigin(t testing.TB) *muxOrigin {
	o := &muxOrigin{visits: map[string]*muxVisit{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/products/{id}/", func(w http.ResponseWriter, r *http.Request) {
		v := r.Context().Value(visitKey{}).(*muxVisit)
		o.mu.Lock()
		v.Route, v.ID = "product", r.PathValue("id")
		o.mu.Unlock()
		_, _ = io.WriteString(w, "product "+r.PathValue("id"))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		v := r.Context().Value(visitKey{}).(*muxVisit)
		o.mu.Lock()
		v.Route = "other"
		o.mu.Unlock()
		_, _ = io.WriteString(w, "other")
	})
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := &muxVisit{URI: r.RequestURI, Verified: r.Header.Get("X-Flashgate-Product"), Responded: true}
		o.mu.Lock()
		o.visits[r.Header.Get("X-Test-Request")] = v
		o.mu.Unlock()
		mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), visitKey{}, v)))
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *muxOrigin) visit(id string) (muxVisit, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	v, ok := o.visits[id]
	if !ok {
		return muxVisit{}, false
	}
	return *v, true
}

// rawGet sends GET path to base with path written byte for byte on the
// request line (net/http would re-encode some spellings).
func rawGet(t testing.TB, base, path string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: edge.test\r\nConnection: close\r\n", path)
	for k, v := range header {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	_, err = io.WriteString(conn, b.String())
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "GET %s", path)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp, body
}

// originStatuses are the ServeMux origin's answers: 200 from a handler, or
// its own redirect of an unclean path (/products/x to /products/x/, a path
// with "//" or dot segments to the clean one), which the worker passes on
// without following it.
var originStatuses = []int{http.StatusOK, http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect}

// TestWorkerPathSpellings sends every spelling of testdata/paths.json through
// worker.js in workerd to a Go net/http.ServeMux origin, once without a token
// and once with a valid token (for the row's product, else for sku-2, the
// product the bypass spellings aim at), and requires for each spelling:
// refused before the origin, or verified for the very product the origin
// routes it to, with the canonical path forwarded (unprotected ones too).
// Whatever the row says, the ServeMux product route is never reached
// unverified or with another product's token (issue 23 §1: /%70roducts/sku-2/
// passed unverified; issue 31 §1: /products/sneakers/..%2F..%2Fabout did,
// since Go 1.22's ServeMux routes the escaped path; TestWorkerOriginMatrix
// runs the table in front of the other origins).
func TestWorkerPathSpellings(t *testing.T) {
	bin := workerdBinary(t)
	wasm := wasmModule(t)
	cases := loadPathCases(t)
	ring, jwks := pathRing(t)
	issuerSrv := stubIssuer(t, jwks, "")
	o := newMuxOrigin(t)
	base := startWorkerd(t, bin, wasm, strings.TrimPrefix(issuerSrv.URL, "http://"),
		strings.TrimPrefix(o.srv.URL, "http://"), "auto")

	n := 0
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			token := c.token(t, ring)
			for _, withToken := range []bool{false, true} {
				n++
				id := fmt.Sprintf("r%d", n)
				hdr := map[string]string{"Accept": acceptJSON, "X-Test-Request": id}
				if withToken {
					hdr["Authorization"] = "Bearer " + token
				}
				resp, body := rawGet(t, base, c.Path, hdr)
				v, reached := o.visit(id)
				what := fmt.Sprintf("%s (token %v): %d %s; origin %+v", c.Path, withToken, resp.StatusCode, body, v)

				// The rule, whatever the row: the product route only ever
				// serves the product the worker verified.
				if v.Route == "product" {
					require.Equal(t, v.ID, v.Verified, "the origin routed a product the worker did not verify: %s", what)
				}

				switch c.Want {
				case "verify":
					if !withToken {
						require.Equal(t, http.StatusUnauthorized, resp.StatusCode, what)
						require.False(t, reached, what)
						continue
					}
					require.Contains(t, originStatuses, resp.StatusCode, what)
					require.True(t, reached, what)
					require.Equal(t, c.Product, v.Verified, what)
					require.Equal(t, c.Forward, v.URI, "the origin must get the canonical path: %s", what)
				case "refuse":
					require.Equal(t, http.StatusBadRequest, resp.StatusCode, what)
					require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), what)
					var p map[string]any
					require.NoError(t, json.Unmarshal(body, &p), what)
					require.Equal(t, "ambiguous_path", p["reason"], what)
					require.Equal(t, "https://flashgate.dev/problems/ambiguous-path", p["type"], what)
					require.False(t, reached, what)
				case "no-product":
					require.Equal(t, http.StatusNotFound, resp.StatusCode, what)
					require.False(t, reached, what)
				case "invalid":
					require.Equal(t, http.StatusBadRequest, resp.StatusCode, what)
					require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), what)
					var p map[string]any
					require.NoError(t, json.Unmarshal(body, &p), what)
					require.Equal(t, "invalid_target", p["reason"], what)
					require.False(t, reached, what)
				case "pass":
					require.Contains(t, originStatuses, resp.StatusCode, what)
					require.True(t, reached, what)
					require.Empty(t, v.Verified, what)
					require.NotEqual(t, "product", v.Route, what)
					require.Equal(t, c.Forward, v.URI, "the origin must get the judged path, not the spelling: %s", what)
				default:
					t.Fatalf("unknown want %q", c.Want)
				}
			}
		})
	}
}

// pathRefusal is the worker's answer to a row it refuses before the origin.
type pathRefusal struct {
	status int
	reason string
}

var pathRefusals = map[string]pathRefusal{
	"refuse":     {http.StatusBadRequest, "ambiguous_path"},
	"invalid":    {http.StatusBadRequest, "invalid_target"},
	"no-product": {http.StatusNotFound, "unknown_route"},
}

// TestWorkerPathSpellingsOriginURL runs the same spellings through worker.js
// in workerd without an ORIGIN binding, forwarding to FLASHGATE_ORIGIN_URL
// with the global fetch (testdata/paths_harness.js stubs it): a verified
// request goes to the origin URL with the canonical path, a refused or
// productless one goes nowhere, an unprotected one goes unverified with its
// canonical path.
func TestWorkerPathSpellingsOriginURL(t *testing.T) {
	bin := workerdBinary(t)
	wasm := wasmModule(t)
	cases := loadPathCases(t)
	ring, jwks := pathRing(t)

	dir := t.TempDir()
	workerdtest.CopyFile(t, filepath.Join("testdata", "paths_harness.js"), filepath.Join(dir, "paths_harness.js"))
	workerdtest.CopyFile(t, "worker.js", filepath.Join(dir, "worker.js"))
	workerdtest.CopyFile(t, wasm, filepath.Join(dir, "flashgate-verifier.wasm"))
	workerdtest.Package(t, dir)
	wln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := workerdtest.Launch(t, bin, dir, filepath.Join("testdata", "paths.capnp.tmpl"), map[string]string{}, wln, "/")

	type request struct {
		Path  string `json:"path"`
		Token string `json:"token"`
	}
	var reqs []request
	for _, c := range cases {
		reqs = append(reqs, request{c.Path, ""}, request{c.Path, c.token(t, ring)})
	}
	in, err := json.Marshal(map[string]any{"jwks": string(jwks), "requests": reqs})
	require.NoError(t, err)
	resp, err := http.Post(base+"/", "application/json", strings.NewReader(string(in)))
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var out []struct {
		Status  int    `json:"status"`
		Reason  string `json:"reason"`
		Fetched string `json:"fetched"`
		Product string `json:"product"`
	}
	require.NoError(t, json.Unmarshal(body, &out))
	require.Len(t, out, len(reqs))

	const originURL = "http://origin.test/base"
	for i, r := range out {
		c := cases[i/2]
		withToken := i%2 == 1
		what := fmt.Sprintf("%s: %s (token %v): %+v", c.Name, c.Path, withToken, r)
		want, refused := pathRefusals[c.Want]
		if c.Want == "verify" && !withToken {
			want, refused = pathRefusal{http.StatusUnauthorized, "missing"}, true
		}
		switch {
		case refused:
			require.Equal(t, want.status, r.Status, what)
			require.Equal(t, want.reason, r.Reason, what)
			require.Empty(t, r.Fetched, what)
		case c.Want == "verify":
			require.Equal(t, http.StatusOK, r.Status, what)
			require.Equal(t, originURL+c.Forward, r.Fetched, "the origin must get the canonical path: %s", what)
			require.Equal(t, c.Product, r.Product, what)
		case c.Want == "pass":
			require.Equal(t, http.StatusOK, r.Status, what)
			require.Equal(t, originURL+c.Forward, r.Fetched, "the origin must get the judged path: %s", what)
			require.Empty(t, r.Product, what)
		default:
			t.Fatalf("unknown want %q", c.Want)
		}
	}
}

// TestWorkerInvalidTargets sends request targets and Host headers the URL
// parser refuses, or that name no path, through worker.js in workerd: each
// is a 400 problem (reason invalid_target) before the origin, not a 500 or
// a 502 (on 4dbe417 "*" answered 502 origin_unreachable and a Host such as
// "[" 500 internal).
func TestWorkerInvalidTargets(t *testing.T) {
	bin := workerdBinary(t)
	wasm := wasmModule(t)
	_, jwks := pathRing(t)
	issuerSrv := stubIssuer(t, jwks, "")
	o := newMuxOrigin(t)
	base := startWorkerd(t, bin, wasm, strings.TrimPrefix(issuerSrv.URL, "http://"),
		strings.TrimPrefix(o.srv.URL, "http://"), "auto")

	for i, c := range []struct{ target, host string }{
		{"*", "edge.test"},
		{"/products/sku-2/", "["},
		{"/products/sku-2/", "[::1"},
		{"/products/sku-2/", "a b"},
		{"/products/sku-2/", "edge.test:99999"},
		{"/products/sku-2/", "%zz"},
		{"/products/sku-2/", "1.2.3.999"},
		{"/about", "a:b:c"},
	} {
		id := fmt.Sprintf("invalid-%d", i)
		conn, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
		require.NoError(t, err)
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: %s\r\nX-Test-Request: %s\r\nConnection: close\r\n\r\n",
			c.target, c.host, acceptJSON, id)
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, "%+v", c)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		_ = conn.Close()
		what := fmt.Sprintf("GET %s, Host %q: %d %s", c.target, c.host, resp.StatusCode, body)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, what)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), what)
		var p map[string]any
		require.NoError(t, json.Unmarshal(body, &p), what)
		require.Equal(t, "invalid_target", p["reason"], what)
		require.Equal(t, "https://flashgate.dev/problems/invalid-target", p["type"], what)
		_, reached := o.visit(id)
		require.False(t, reached, what)
	}
}
