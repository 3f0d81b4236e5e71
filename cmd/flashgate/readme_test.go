package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
)

// readmeCommand is one curl command of a ```sh block of README.md or of
// docs/*.md that calls the HTTP API (/admin or /v1), continuation lines
// joined.
type readmeCommand struct {
	file string // README.md or docs/….md, relative to the repository root
	line int    // line of file it starts on
	cmd  string // as written
	// setup is the block's shell assignments written before it
	// (`opens=$(date -u -d '+1 hour' …)`), run first in the same shell:
	// a document computes instants relative to now, never writes one.
	setup string
	block int // index of its ```sh block
	// status is the status the README's comment after it shows (a
	// line "# 403 {…}"), 0 when it shows none.
	status int
}

// readmeDocs are the documents whose curl examples TestREADMECurlCommands
// runs: README.md and every docs/*.md (the guides the README split into).
func readmeDocs(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	require.NoError(t, err)
	return append([]string{filepath.Join("..", "..", "README.md")}, docs...)
}

// readmeCommands extracts the API curl commands of the ```sh blocks of
// README.md and docs/*.md; block numbers run on across the files.
func readmeCommands(t *testing.T) []readmeCommand {
	t.Helper()
	var out []readmeCommand
	block := -1
	for _, path := range readmeDocs(t) {
		out, block = appendCommands(t, out, block, path)
	}
	return out
}

// appendCommands appends the API curl commands of path's ```sh blocks to
// out; block is the last block number used.
func appendCommands(t *testing.T, out []readmeCommand, block int, path string) ([]readmeCommand, int) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	file := filepath.ToSlash(strings.TrimPrefix(path, filepath.Join("..", "..")+string(filepath.Separator)))
	lines := strings.Split(string(data), "\n")
	in := false
	var setup string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "```sh"):
			in, block, setup = true, block+1, ""
			continue
		case strings.HasPrefix(l, "```"):
			in = false
			continue
		}
		if in && shellAssignment.MatchString(l) {
			setup += l + "\n"
			continue
		}
		if !in || !strings.HasPrefix(l, "curl ") {
			continue
		}
		c := readmeCommand{file: file, line: i + 1, block: block, cmd: l, setup: setup}
		for strings.HasSuffix(c.cmd, `\`) && i+1 < len(lines) {
			i++
			c.cmd = strings.TrimSuffix(c.cmd, `\`) + " " + strings.TrimSpace(lines[i])
		}
		if !strings.Contains(c.cmd, "localhost:8080/admin/") && !strings.Contains(c.cmd, "localhost:8080/v1/") {
			continue
		}
		if i+1 < len(lines) {
			if f := strings.Fields(lines[i+1]); len(f) > 1 && f[0] == "#" {
				if n, err := strconv.Atoi(f[1]); err == nil && n >= 100 && n < 600 {
					c.status = n
				}
			}
		}
		out = append(out, c)
	}
	return out, block
}

// shellAssignment matches a document's shell variable assignment from a
// command substitution (`opens=$(date …)`).
var shellAssignment = regexp.MustCompile(`^[a-z_]+=\$\(`)

// TestREADMECurlCommands runs every curl command of the ```sh blocks of
// README.md and docs/*.md that calls /admin or /v1, as written (by sh, with real curl),
// against `flashgate serve` as the quick start runs it (embedded Redis,
// FLASHGATE_DEFAULT_ROOM=open, FLASHGATE_ADMIN_TOKEN set), one fresh server
// per block in which room sku-1 exists (the blocks continue a sale); only
// localhost:8080 becomes the test server's address. None
// may be refused for its encoding (415 unsupported_media, 400
// malformed_json: curl -d sends application/x-www-form-urlencoded unless
// told otherwise). A command without a "…" placeholder must answer what
// the document shows: the status of a "# 403 …" comment after it, else 2xx.
// A status line is added by a curlrc (write-out), not by the command.
func TestREADMECurlCommands(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is not installed: apt-get install curl (make test installs it, scripts/ensure-redis.sh)")
	}
	cmds := readmeCommands(t)
	require.GreaterOrEqual(t, len(cmds), 10, "the API examples of README.md and docs/")
	var admin, body int
	for _, c := range cmds {
		if strings.Contains(c.cmd, "/admin/") {
			admin++
		}
		if strings.Contains(c.cmd, " -d ") {
			body++
		}
	}
	require.GreaterOrEqual(t, admin, 5)
	require.GreaterOrEqual(t, body, 5)

	home := t.TempDir() // curl reads $CURL_HOME/.curlrc: the status line, and no user config
	require.NoError(t, os.WriteFile(filepath.Join(home, ".curlrc"), []byte("write-out = \"\\n%{http_code}\"\n"), 0o600))
	const token = "readme-admin-token-of-32-bytes-min"
	for block := 0; block <= cmds[len(cmds)-1].block; block++ {
		var these []readmeCommand
		for _, c := range cmds {
			if c.block == block {
				these = append(these, c)
			}
		}
		if len(these) == 0 {
			continue
		}
		base := startReadmeServer(t, token)
		// The blocks continue a sale of room sku-1: it exists before each.
		req, err := http.NewRequest(http.MethodPut, "http://"+base+"/admin/rooms/sku-1",
			strings.NewReader(`{"capacity":100,"rate_per_minute":600}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		for _, c := range these {
			sh := exec.Command("sh", "-c", c.setup+strings.ReplaceAll(c.cmd, "localhost:8080", base))
			sh.Env = append(os.Environ(), "CURL_HOME="+home, "HOME="+home, "XDG_CONFIG_HOME="+home,
				"FLASHGATE_ADMIN_TOKEN="+token, "PATH="+filepath.Dir(curl)+string(os.PathListSeparator)+os.Getenv("PATH"))
			out, err := sh.Output()
			require.NoError(t, err, "%s:%d %s", c.file, c.line, c.cmd)
			s := string(out)
			k := strings.LastIndexByte(s, '\n')
			require.GreaterOrEqual(t, k, 0, "%s:%d: no status line in %q", c.file, c.line, s)
			status, err := strconv.Atoi(s[k+1:])
			require.NoError(t, err, "%s:%d: %q", c.file, c.line, s)
			answer := s[:k]
			assert.NotEqual(t, http.StatusUnsupportedMediaType, status, "%s:%d %s\n%s", c.file, c.line, c.cmd, answer)
			assert.NotContains(t, answer, "malformed_json", "%s:%d %s", c.file, c.line, c.cmd)
			if strings.Contains(c.cmd, "…") {
				continue // a placeholder token: refused as such, which is not the README's point
			}
			if c.status != 0 {
				assert.Equal(t, c.status, status, "%s:%d %s\n%s", c.file, c.line, c.cmd, answer)
			} else {
				assert.True(t, status >= 200 && status < 300, "%s:%d %s: %d %s", c.file, c.line, c.cmd, status, answer)
			}
		}
	}
}

// startReadmeServer runs `flashgate serve` as README's quick start does,
// with the admin API on, and returns its host:port; it stops with the test.
func startReadmeServer(t *testing.T, adminToken string) string {
	t.Helper()
	t.Setenv("REDIS_URL", "")
	t.Setenv("FLASHGATE_DEFAULT_ROOM", "open")
	t.Setenv("FLASHGATE_ADMIN_TOKEN", adminToken)
	addr, _, _ := startServe(t)
	return addr
}

// startServe runs `flashgate serve` with the test's environment on a free
// loopback port, a fresh key ring file, until the test ends (or stop, which
// cancels it and returns its exit code); it returns the host:port once
// /readyz answers 200, and serve's stderr.
func startServe(t *testing.T) (addr string, stop func() int, stderr *syncBuffer) {
	t.Helper()
	addr = fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	t.Setenv("FLASHGATE_ADDR", addr)
	t.Setenv("FLASHGATE_KEYS_FILE", filepath.Join(t.TempDir(), "keys.json"))
	ctx, cancel := context.WithCancel(context.Background())
	stderr = &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve"}, strings.NewReader(""), &syncBuffer{}, stderr) }()
	var once sync.Once
	var code int
	stop = func() int { once.Do(func() { cancel(); code = <-done }); return code }
	t.Cleanup(func() { stop() })
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, time.Minute, 20*time.Millisecond, "serve never became ready: %s", stderr.String())
	return addr, stop, stderr
}
