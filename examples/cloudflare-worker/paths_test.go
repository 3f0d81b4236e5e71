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

	"github.com/flashgate/flashgate/keys"
)

// pathCase is one row of testdata/paths.json.
type pathCase struct {
	Name    string `json:"name"`
	Path    string `json:"path"`
	Want    string `json:"want"` // verify, refuse, no-product, pass
	Product string `json:"product"`
	Forward string `json:"forward"`
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
// routes it to, with the normalised path forwarded. Whatever the row says,
// the ServeMux product route is never reached unverified or with another
// product's token (issue 23 §1: /%70roducts/sku-2/ passed unverified).
func TestWorkerPathSpellings(t *testing.T) {
	bin := workerdBinary(t)
	wasm := wasmModule(t)
	raw, err := os.ReadFile(filepath.Join("testdata", "paths.json"))
	require.NoError(t, err)
	var table struct {
		Prefix string     `json:"prefix"`
		Cases  []pathCase `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(raw, &table))
	require.Equal(t, "/products/", table.Prefix, "config.capnp.tmpl's FLASHGATE_PRODUCT_PREFIX")

	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	jwks, err := ring.PublicJWKS()
	require.NoError(t, err)
	issuerSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jwks)
	}))
	t.Cleanup(issuerSrv.Close)
	o := newMuxOrigin(t)
	base := startWorkerd(t, bin, wasm, strings.TrimPrefix(issuerSrv.URL, "http://"),
		strings.TrimPrefix(o.srv.URL, "http://"), "auto")

	now := time.Now()
	n := 0
	for _, c := range table.Cases {
		t.Run(c.Name, func(t *testing.T) {
			product := c.Product
			if product == "" {
				product = "sku-2"
			}
			token := sign(t, ring, "alice", product, "jti-"+product, now, now.Add(5*time.Minute))
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
					require.Equal(t, c.Forward, v.URI, "the origin must get the normalised path: %s", what)
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
				case "pass":
					require.Contains(t, originStatuses, resp.StatusCode, what)
					require.True(t, reached, what)
					require.Empty(t, v.Verified, what)
					require.NotEqual(t, "product", v.Route, what)
				default:
					t.Fatalf("unknown want %q", c.Want)
				}
			}
		})
	}
}
