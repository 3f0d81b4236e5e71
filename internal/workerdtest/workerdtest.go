// Package workerdtest starts Cloudflare's workerd for tests: the worker
// end-to-end test (examples/cloudflare-worker) and the browser test
// (examples/browser) run the same worker the same way.
package workerdtest

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Launch fills in the template tmpl (vars plus PORT, the port of wln) as
// dir's config.capnp, runs workerd (bin) on it, listening on wln's socket
// (opened by the caller: no free-port race; Launch closes wln), and returns
// its base URL once GET readyPath answers 404 — a path the worker answers
// itself. It fails t when workerd exits or does not answer within 30 s;
// workerd is killed at t's cleanup, and its log is printed if t failed.
func Launch(t testing.TB, bin, dir, tmpl string, vars map[string]string, wln net.Listener, readyPath string) string {
	t.Helper()
	port := wln.Addr().(*net.TCPAddr).Port
	text, err := os.ReadFile(tmpl)
	require.NoError(t, err)
	vars["PORT"] = strconv.Itoa(port)
	config := os.Expand(string(text), func(k string) string {
		v, ok := vars[k]
		if !ok {
			t.Fatalf("%s: unknown placeholder ${%s}", tmpl, k)
		}
		return v
	})
	cfgPath := filepath.Join(dir, "config.capnp")
	require.NoError(t, os.WriteFile(cfgPath, []byte(config), 0o644))

	sock, err := wln.(*net.TCPListener).File()
	require.NoError(t, err)
	_ = wln.Close()
	logPath := filepath.Join(dir, "workerd.log")
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(bin, "serve", cfgPath, "--verbose", "--socket-fd", "http=3")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{sock}
	require.NoError(t, cmd.Start())
	_ = sock.Close()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("workerd log:\n%s", b)
		}
	})
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	client := &http.Client{Timeout: 2 * time.Second}

	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("workerd exited during start-up:\n%s", b)
		default:
		}
		resp, err := client.Get(base + readyPath)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusNotFound {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("workerd did not answer within 30 s (last error %v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return base
}

// CopyFile copies from to to (a worker's script or module into its directory).
func CopyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o644))
}
