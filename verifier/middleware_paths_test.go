package verifier_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/testkit"
	"github.com/flashgate/flashgate/internal/testing/tokencases"
	"github.com/flashgate/flashgate/verifier"
)

// spellings are the request targets of the example worker's path table
// (examples/cloudflare-worker/testdata/paths.json, issue 31 §1).
func spellings(t *testing.T) []string {
	raw, err := os.ReadFile(filepath.Join("..", "examples", "cloudflare-worker", "testdata", "paths.json"))
	require.NoError(t, err)
	var table struct {
		Cases []struct {
			Path string `json:"path"`
		} `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(raw, &table))
	require.Greater(t, len(table.Cases), 100)
	out := make([]string, 0, len(table.Cases))
	for _, c := range table.Cases {
		out = append(out, c.Path)
	}
	return out
}

// getRaw sends GET target to srv with the target byte for byte on the
// request line and returns the status and body.
func getRaw(t *testing.T, srv *httptest.Server, target, bearer string) (int, string) {
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(srv.URL, "http://"), 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	auth := ""
	if bearer != "" {
		auth = "Authorization: Bearer " + bearer + "\r\n"
	}
	_, err = fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: shop.test\r\n%sConnection: close\r\n\r\n", target, auth)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, target)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, string(body)
}

// pathShop is an order service guarded as MiddlewareOptions.Product says:
// ServeMux routes /products/{product}/… to a handler behind Middleware and
// the handler serves the product product(r) names… or the mux's PathValue.
func pathShop(t *testing.T, v *verifier.Verifier, product func(*http.Request) string) *httptest.Server {
	mux := http.NewServeMux()
	guarded := verifier.Middleware(v, verifier.MiddlewareOptions{Product: product})(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "product "+r.PathValue("product"))
		}))
	mux.Handle("GET /products/{product}", guarded)
	mux.Handle("GET /products/{product}/", guarded)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "public") })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestMiddlewareProductIsTheRoutedProduct runs every spelling of the worker's
// path table against an order service that takes MiddlewareOptions.Product
// from the ServeMux's own PathValue, as its doc says, with no token and with
// a valid token for sku-2: a product page is only ever served for the
// product that was verified, however the path is spelled (Middleware judges
// the product the router chose; it reads no path of its own).
func TestMiddlewareProductIsTheRoutedProduct(t *testing.T) {
	set := buildSet(t)
	c := set.Cases[0]
	v := tokencases.Verifier(t, set, set.Config(c))
	srv := pathShop(t, v, func(r *http.Request) string { return r.PathValue("product") })
	token := (&testkit.Signer{Kid: set.CurrentKID, Key: set.Current}).Sign(flashgate.NewClaims(
		tokencases.Issuer, "orders", "user-1", "sku-2", "j-sku-2",
		time.Unix(c.Now-10, 0), time.Unix(c.Now+300, 0)))

	served := 0
	for _, target := range spellings(t) {
		if !strings.HasPrefix(target, "/") {
			continue // "*" and absolute-form: net/http's business, not a path
		}
		status, body := getRaw(t, srv, target, "")
		require.False(t, strings.HasPrefix(body, "product "), "no token, %s: %d %s", target, status, body)
		status, body = getRaw(t, srv, target, token)
		if p, ok := strings.CutPrefix(body, "product "); ok {
			served++
			require.Equal(t, "sku-2", p, "a sku-2 token, %s: %d %s", target, status, body)
		}
	}
	require.Greater(t, served, 5, "some of the table's sku-2 spellings reach the product page with the token (ServeMux redirects the unclean ones)")
}

// TestMiddlewareProductFromAnotherReading is the mistake the Product doc
// warns of: the product taken from r.URL.Path (decoded, %2F included) while
// ServeMux routes on the escaped path. /products/sku-1%2F..%2Fsku-2/ is then
// verified as sku-1 and served as the product segment "sku-1/../sku-2".
func TestMiddlewareProductFromAnotherReading(t *testing.T) {
	set := buildSet(t)
	c := set.Cases[0]
	v := tokencases.Verifier(t, set, set.Config(c))
	srv := pathShop(t, v, func(r *http.Request) string {
		segs := strings.Split(r.URL.Path, "/")
		if len(segs) < 3 {
			return ""
		}
		return segs[2]
	})
	token := (&testkit.Signer{Kid: set.CurrentKID, Key: set.Current}).Sign(flashgate.NewClaims(
		tokencases.Issuer, "orders", "user-1", "sku-1", "j-sku-1",
		time.Unix(c.Now-10, 0), time.Unix(c.Now+300, 0)))
	status, body := getRaw(t, srv, "/products/sku-1%2F..%2Fsku-2/", token)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "product sku-1/../sku-2", body, "verified sku-1, routed another product segment")
}
