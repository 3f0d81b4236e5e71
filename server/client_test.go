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
