package server

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClientJS runs the browser client's unit tests (page/*.test.mjs)
// under Node's test runner. Node is part of the CI image: its absence is a
// failure, not a skip.
func TestClientJS(t *testing.T) {
	node, err := exec.LookPath("node")
	require.NoError(t, err, "node is required to test the browser client (server/page/*.test.mjs)")
	files, err := filepath.Glob(filepath.Join("page", "*.test.mjs"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out, err := exec.Command(node, append([]string{"--test"}, files...)...).CombinedOutput()
	require.NoError(t, err, "node --test %v:\n%s", files, out)
}

func TestClientServed(t *testing.T) {
	e := newEnv(t)
	r := e.do(req{method: "GET", path: "/flashgate-client.js"})
	require.Equal(t, 200, r.status)
	assert.Equal(t, "text/javascript; charset=utf-8", r.header.Get("Content-Type"))
	assert.Equal(t, "public, max-age=300", r.header.Get("Cache-Control"))
	assert.Equal(t, "nosniff", r.header.Get("X-Content-Type-Options"))
	assert.Contains(t, string(r.body), "export function createClient")
	etag := r.header.Get("ETag")
	require.NotEmpty(t, etag)
	r = e.do(req{method: "GET", path: "/flashgate-client.js", hdr: map[string]string{"If-None-Match": etag}})
	assert.Equal(t, 304, r.status)
	assert.Empty(t, r.body)
}

// TestClientCrossOriginImport (issue 23 §6): docs/browser.md#the-browser-client's cross-origin
// `import … from "https://queue…/flashgate-client.js"` is a CORS-mode fetch
// without credentials: the client answers Access-Control-Allow-Origin: *
// (never with credentials allowed), with or without configured origins, a
// 304 too; the waiting page's own script stays same-origin.
func TestClientCrossOriginImport(t *testing.T) {
	for name, e := range map[string]*env{
		"no CORS origins": newEnv(t),
		"CORS origins":    newEnv(t, withOptions(func(o *Options) { o.CORSOrigins = []string{"https://shop.example"} })),
	} {
		for _, origin := range []string{"https://shop.example", "https://elsewhere.example"} {
			r := e.do(req{method: "GET", path: "/flashgate-client.js", hdr: map[string]string{"Origin": origin}})
			require.Equal(t, 200, r.status, name)
			assert.Equal(t, "*", r.header.Get("Access-Control-Allow-Origin"), "%s %s", name, origin)
			assert.Empty(t, r.header.Get("Access-Control-Allow-Credentials"), name)
			r = e.do(req{method: "GET", path: "/flashgate-client.js", hdr: map[string]string{"Origin": origin, "If-None-Match": r.header.Get("ETag")}})
			assert.Equal(t, 304, r.status)
			assert.Equal(t, "*", r.header.Get("Access-Control-Allow-Origin"), "a revalidation keeps it readable")
		}
		r := e.do(req{method: "GET", path: "/wait/assets/wait.js", hdr: map[string]string{"Origin": "https://elsewhere.example"}})
		assert.Empty(t, r.header.Get("Access-Control-Allow-Origin"), "the page's own script is not for other origins")
	}
}
