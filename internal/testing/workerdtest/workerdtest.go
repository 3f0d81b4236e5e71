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
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/wasmbuild"
)

// PackageModule is where a workerd configuration embeds the flashgate-verifier
// package's ES module from, relative to the configuration's directory: the
// place `npm ci` links the package (js/flashgate-verifier) in
// examples/cloudflare-worker.
const PackageModule = "node_modules/flashgate-verifier/index.js"

// optionalRE matches a template's "# optional: NAME NAME…" line: placeholders
// a caller may leave out of vars (they are then empty).
var optionalRE = regexp.MustCompile(`(?m)^#\s*optional:\s*(.*)$`)

// Launch fills in the template tmpl (vars plus PORT, the port of wln) as
// dir's config.capnp, runs workerd (bin) on it, listening on wln's socket
// (opened by the caller: no free-port race; Launch closes wln), and returns
// its base URL once GET readyPath answers 404 — a path the worker answers
// itself. It fails t when workerd exits or does not answer within 30 s;
// workerd is killed at t's cleanup, and its log is printed if t failed.
//
// A placeholder missing from vars fails t, unless the template lists it on
// a "# optional: NAME…" line. A template that embeds PackageModule gets the
// repository's js/flashgate-verifier/index.js copied there when dir has none.
func Launch(t testing.TB, bin, dir, tmpl string, vars map[string]string, wln net.Listener, readyPath string) string {
	t.Helper()
	vars["PORT"] = strconv.Itoa(wln.Addr().(*net.TCPAddr).Port)
	return LaunchSockets(t, bin, dir, tmpl, vars, map[string]net.Listener{"http": wln}, "http", readyPath)["http"]
}

// LaunchSockets is Launch for a configuration with several sockets: lns maps
// each socket's name in the configuration to its listener (workerd gets them
// all with --socket-fd; the template's own addresses are not used). It waits
// until GET readyPath on socket ready answers 404 and returns each socket's
// base URL. The caller sets any port placeholders itself.
func LaunchSockets(t testing.TB, bin, dir, tmpl string, vars map[string]string, lns map[string]net.Listener,
	ready, readyPath string) map[string]string {
	t.Helper()
	text, err := os.ReadFile(tmpl)
	require.NoError(t, err)
	optional := map[string]bool{}
	for _, m := range optionalRE.FindAllStringSubmatch(string(text), -1) {
		for _, name := range strings.Fields(m[1]) {
			optional[name] = true
		}
	}
	config := os.Expand(string(text), func(k string) string {
		v, ok := vars[k]
		if !ok && !optional[k] {
			t.Fatalf("%s: unknown placeholder ${%s}", tmpl, k)
		}
		return v
	})
	if strings.Contains(config, `embed "`+PackageModule+`"`) {
		if _, err := os.Stat(filepath.Join(dir, PackageModule)); err != nil {
			Package(t, dir)
		}
	}
	cfgPath := filepath.Join(dir, "config.capnp")
	require.NoError(t, os.WriteFile(cfgPath, []byte(config), 0o644))

	names := make([]string, 0, len(lns))
	for name := range lns {
		names = append(names, name)
	}
	sort.Strings(names)
	args := []string{"serve", cfgPath, "--verbose"}
	var files []*os.File
	bases := map[string]string{}
	for i, name := range names {
		ln := lns[name]
		f, err := ln.(*net.TCPListener).File()
		require.NoError(t, err)
		_ = ln.Close()
		files = append(files, f)
		args = append(args, "--socket-fd", name+"="+strconv.Itoa(3+i))
		bases[name] = "http://127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	}
	logPath := filepath.Join(dir, "workerd.log")
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = files
	require.NoError(t, cmd.Start())
	for _, f := range files {
		_ = f.Close()
	}
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
	base := bases[ready]
	require.NotEmpty(t, base, "no socket %q", ready)
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
	return bases
}

// Package copies the flashgate-verifier package's ES module (the
// repository's js/flashgate-verifier/index.js) to dir/PackageModule, where
// the worker configurations embed it from.
func Package(t testing.TB, dir string) {
	t.Helper()
	to := filepath.Join(dir, PackageModule)
	require.NoError(t, os.MkdirAll(filepath.Dir(to), 0o755))
	CopyFile(t, filepath.Join(wasmbuild.Root(t), "js", "flashgate-verifier", "index.js"), to)
}

// Log returns what workerd has logged so far in dir (Launch's workerd.log).
func Log(t testing.TB, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "workerd.log"))
	require.NoError(t, err)
	return string(b)
}

// CopyFile copies from to to (a worker's script or module into its directory).
func CopyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o644))
}

// Binary returns the workerd executable npm installs in
// examples/cloudflare-worker (pinned by its package-lock.json), failing t
// when it is missing.
func Binary(t testing.TB) string {
	t.Helper()
	arch := map[string]string{"amd64": "64", "arm64": "arm64"}[runtime.GOARCH]
	bin := filepath.Join(wasmbuild.Root(t), "examples", "cloudflare-worker", "node_modules", "@cloudflare",
		"workerd-"+runtime.GOOS+"-"+arch, "bin", "workerd")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("workerd is not installed (%v): run `npm ci` in examples/cloudflare-worker (`make test` does)", err)
	}
	return bin
}
