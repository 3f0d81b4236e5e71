package browser_test

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/internal/testing/wasmbuild"
	"github.com/flashgate/flashgate/internal/testing/workerdtest"
)

const adminToken = "browser-test-admin-token-32-bytes"

// repoRoot is the module root (this package is examples/browser).
func repoRoot(t testing.TB) string { return wasmbuild.Root(t) }

// buildFlashgate builds cmd/flashgate into a temporary directory.
func buildFlashgate(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "flashgate")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/flashgate")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/flashgate: %v\n%s", err, out)
	}
	return bin
}

// issuerProc is `flashgate serve` as a child process; restart keeps its
// environment and address.
type issuerProc struct {
	t    testing.TB
	bin  string
	env  []string
	base string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

func startIssuer(t testing.TB, bin string, env map[string]string) *issuerProc {
	t.Helper()
	port := redistest.FreePort(t)
	p := &issuerProc{t: t, bin: bin, base: fmt.Sprintf("http://127.0.0.1:%d", port),
		log: filepath.Join(t.TempDir(), "issuer.log")}
	env["FLASHGATE_ADDR"] = fmt.Sprintf("127.0.0.1:%d", port)
	for k, v := range env {
		p.env = append(p.env, k+"="+v)
	}
	p.start()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			b, _ := os.ReadFile(p.log)
			t.Logf("issuer log:\n%s", b)
		}
	})
	return p
}

func (p *issuerProc) start() {
	p.t.Helper()
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(p.t, err)
	p.cmd = exec.Command(p.bin, "serve")
	p.cmd.Env = append(os.Environ(), p.env...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	require.NoError(p.t, p.cmd.Start())
	p.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); _ = logf.Close(); close(done) }(p.cmd, p.done)
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-p.done:
			b, _ := os.ReadFile(p.log)
			p.t.Fatalf("flashgate serve exited during start-up:\n%s", b)
		default:
		}
		if resp, err := client.Get(p.base + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(p.log)
			p.t.Fatalf("flashgate serve not ready within 30 s:\n%s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill stops the issuer abruptly (SIGKILL: a crash, nothing handed over).
func (p *issuerProc) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.cmd = nil
}

// shop is the origin behind the worker: a product page that records who
// the worker said the shopper is.
type shop struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []shopVisit
}

type shopVisit struct{ Path, User, Product string }

func newShop(t testing.TB) *shop {
	s := &shop{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/favicon.ico" {
			http.NotFound(w, r)
			return
		}
		user := r.Header.Get("X-Flashgate-User")
		s.mu.Lock()
		s.seen = append(s.seen, shopVisit{r.URL.RequestURI(), user, r.Header.Get("X-Flashgate-Product")})
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Shop · %[1]s</title></head>
<body style="font-family:sans-serif;margin:3rem"><h1 id="shop">The shop: %[1]s</h1>
<p>You are in. The edge worker verified your admission cookie.</p>
<p>Shopper <code id="user">%[2]s</code></p></body></html>`, html.EscapeString(r.URL.Path), html.EscapeString(user))
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *shop) visits() []shopVisit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]shopVisit(nil), s.seen...)
}

// startWorker runs examples/cloudflare-worker in workerd on port (its pinned npm
// package) with the wasm verifier, in front of originAddr, keys from the
// issuer's JWKS and its waiting room at waitingURL.
func startWorker(t testing.TB, port int, issuerAddr, originAddr, waitingURL string) string {
	t.Helper()
	wdir := filepath.Join(repoRoot(t), "examples", "cloudflare-worker")
	bin := workerdtest.Binary(t)
	wasm := wasmbuild.Path(t)
	dir := t.TempDir()
	workerdtest.CopyFile(t, filepath.Join(wdir, "worker.js"), filepath.Join(dir, "worker.js"))
	workerdtest.CopyFile(t, wasm, filepath.Join(dir, "flashgate-verifier.wasm"))

	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	require.NoError(t, err)
	// Ready when the worker itself answers: /products/ names no product, so
	// the worker answers 404 without touching the issuer or the origin.
	return workerdtest.Launch(t, bin, dir, filepath.Join(wdir, "config.capnp.tmpl"), map[string]string{
		"ISSUER_ADDR": issuerAddr, "ORIGIN_ADDR": originAddr, "JWKS_TTL_SECONDS": "300",
		"WAITING_ROOM_URL": waitingURL}, ln, "/products/")
}

// admin calls the admin API.
func admin(t testing.TB, base, method, path, body string) map[string]any {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Contains(t, []int{http.StatusOK, http.StatusCreated}, resp.StatusCode, "%s %s: %s", method, path, b)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m), "%s", b)
	return m
}

// buyer is another shopper in line, driven over the HTTP API with its own
// cookie jar (visitor mode: the jar holds its flashgate_visitor cookie).
type buyer struct {
	name, base, room string
	hc               *http.Client
	waiting          string // waiting token
	admission        string // admission token
}

func newBuyer(t testing.TB, name, base, room string) *buyer {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &buyer{name: name, base: base, room: room, hc: &http.Client{Jar: jar, Timeout: 5 * time.Second}}
}

func (b *buyer) call(method, path, bearer string) (int, map[string]any, error) {
	req, err := http.NewRequest(method, b.base+path, nil)
	if err != nil {
		return 0, nil, err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	return resp.StatusCode, m, nil
}

// enter lines the buyer up and returns its state.
func (b *buyer) enter(t testing.TB) string {
	t.Helper()
	st, m, err := b.call(http.MethodPost, "/v1/rooms/"+b.room+"/enter", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, st, "%s enter: %v", b.name, m)
	b.waiting, _ = m["waiting_token"].(string)
	require.NotEmpty(t, b.waiting)
	s, _ := m["state"].(string)
	return s
}

// buy waits for the buyer's turn, exchanges and completes the order, which
// frees its place for the next in line.
func (b *buyer) buy(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, m, err := b.call(http.MethodGet, "/v1/rooms/"+b.room+"/status", b.waiting)
		if err == nil && st == http.StatusOK && m["state"] == "ACTIVE" {
			break
		}
		require.True(t, time.Now().Before(deadline), "%s never admitted: %d %v %v", b.name, st, m, err)
		time.Sleep(50 * time.Millisecond)
	}
	st, m, err := b.call(http.MethodPost, "/v1/rooms/"+b.room+"/exchange", b.waiting)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, st, "%s exchange: %v", b.name, m)
	b.admission, _ = m["admission_token"].(string)
	complete(t, b.base, b.room, b.admission)
}

// complete is the shop's order service consuming an admission.
func complete(t testing.TB, base, room, admission string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/complete?product="+room, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+admission)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "complete: %s", b)
}

func TestMain(m *testing.M) {
	code := m.Run()
	wasmbuild.Cleanup()
	os.Exit(code)
}
