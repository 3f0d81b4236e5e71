package browser_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// chromium is the browser the test drives: $CHROMIUM or Debian's package.
func chromium() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// browser is driver.mjs: Chromium under playwright-core, one JSON command
// per line.
type browser struct {
	t      testing.TB
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	mu     sync.Mutex
	nextID int
	stderr *strings.Builder
}

// view is what a page shows (driver.mjs's view).
type view struct {
	URL      string  `json:"url"`
	Title    string  `json:"title"`
	State    *string `json:"state"`
	Token    *string `json:"token"` // the waiting token the page was rendered with
	Position *string `json:"position"`
	Ahead    *string `json:"ahead"`
	Heading  *string `json:"heading"`
	PoWMs    *string `json:"powMs"`     // data-pow-ms: the proof of work's solve time (ms), once solved
	PoWHash  *string `json:"powHashes"` // data-pow-hashes: how many SHA-256 it tried
	Ready    *string `json:"ready"`     // data-ready-ms: wait.js runs (ms since navigation start)
	Live     *string `json:"live"`      // the live region's text
	Body     string  `json:"body"`
}

func (v view) state() string    { return deref(v.State) }
func (v view) position() string { return strings.TrimSpace(deref(v.Position)) }
func (v view) heading() string  { return strings.TrimSpace(deref(v.Heading)) }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// launchBrowser starts driver.mjs and fails the test — never skips — if
// Node, playwright-core or Chromium is missing or the browser cannot start.
func launchBrowser(t testing.TB) *browser {
	t.Helper()
	if _, err := os.Stat(chromium()); err != nil {
		t.Fatalf("Chromium is not installed at %s (%v): run scripts/install-chromium.sh (`make test` does)", chromium(), err)
	}
	if _, err := os.Stat(filepath.Join("node_modules", "playwright-core")); err != nil {
		t.Fatalf("playwright-core is not installed (%v): run `npm ci` in examples/browser (`make test` does)", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found: %v", err)
	}
	b := &browser{t: t, stderr: &strings.Builder{}}
	b.cmd = exec.Command(node, "driver.mjs")
	b.cmd.Env = append(os.Environ(), "CHROMIUM="+chromium())
	b.cmd.Stderr = &lockedWriter{w: b.stderr}
	b.in, err = b.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := b.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	b.out = bufio.NewScanner(stdout)
	b.out.Buffer(make([]byte, 1<<20), 16<<20)
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("start driver.mjs: %v", err)
	}
	t.Cleanup(func() {
		_ = b.in.Close()
		done := make(chan struct{})
		go func() { _ = b.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = b.cmd.Process.Kill()
			<-done
		}
	})
	var hello struct {
		Ready   bool   `json:"ready"`
		Version string `json:"version"`
		Error   string `json:"error"`
	}
	line, err := b.read(60 * time.Second)
	if err != nil {
		t.Fatalf("the browser did not start: %v\nstderr: %s", err, b.stderr)
	}
	if json.Unmarshal(line, &hello) != nil || !hello.Ready {
		t.Fatalf("the browser did not start: %s\nstderr: %s", line, b.stderr)
	}
	t.Logf("Chromium %s", hello.Version)
	return b
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (b *browser) read(timeout time.Duration) ([]byte, error) {
	type res struct {
		line []byte
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		if b.out.Scan() {
			ch <- res{append([]byte(nil), b.out.Bytes()...), nil}
			return
		}
		err := b.out.Err()
		if err == nil {
			err = io.EOF
		}
		ch <- res{nil, err}
	}()
	select {
	case r := <-ch:
		return r.line, r.err
	case <-time.After(timeout):
		_ = b.cmd.Process.Kill()
		return nil, fmt.Errorf("no answer within %s", timeout)
	}
}

// do runs one command and decodes its result into into (may be nil).
func (b *browser) do(into any, op string, args map[string]any) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nextID++
	cmd := map[string]any{"id": b.nextID, "op": op}
	for k, v := range args {
		cmd[k] = v
	}
	line, _ := json.Marshal(cmd)
	if _, err := b.in.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("%s: %w (stderr: %s)", op, err, b.stderr)
	}
	resp, err := b.read(45 * time.Second)
	if err != nil {
		return fmt.Errorf("%s: %w (stderr: %s)", op, err, b.stderr)
	}
	var r struct {
		ID     int             `json:"id"`
		OK     bool            `json:"ok"`
		Error  string          `json:"error"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		return fmt.Errorf("%s: bad answer %q", op, resp)
	}
	if !r.OK {
		return fmt.Errorf("%s %v: %s", op, args, r.Error)
	}
	if into != nil {
		return json.Unmarshal(r.Result, into)
	}
	return nil
}

// must is do that fails the test on error.
func (b *browser) must(into any, op string, args map[string]any) {
	b.t.Helper()
	if err := b.do(into, op, args); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) newContext(ctx string, js bool) {
	b.t.Helper()
	b.must(nil, "newContext", map[string]any{"ctx": ctx, "js": js})
}

func (b *browser) newPage(ctx, page string) {
	b.t.Helper()
	b.must(nil, "newPage", map[string]any{"ctx": ctx, "page": page})
}

func (b *browser) goTo(page, url string) (status int, final string) {
	b.t.Helper()
	var r struct {
		URL    string `json:"url"`
		Status int    `json:"status"`
	}
	b.must(&r, "goto", map[string]any{"page": page, "url": url})
	return r.Status, r.URL
}

// view reads the page; js false reads it without running script in the page.
func (b *browser) view(page string, js bool) (view, error) {
	var v view
	err := b.do(&v, "view", map[string]any{"page": page, "js": js})
	return v, err
}

func (b *browser) history(page string) []string {
	b.t.Helper()
	var r struct {
		URLs []string `json:"urls"`
	}
	b.must(&r, "history", map[string]any{"page": page})
	return r.URLs
}

func (b *browser) waitURL(page, prefix string, timeout time.Duration) string {
	b.t.Helper()
	var r struct {
		URL string `json:"url"`
	}
	b.must(&r, "waitURL", map[string]any{"page": page, "prefix": prefix, "timeout": timeout.Milliseconds()})
	return r.URL
}

// screenshot writes page's screenshot to path; a shot the browser could not
// take in time is logged, not failed (screenshots are artifacts).
func (b *browser) screenshot(page, path string) {
	b.t.Helper()
	var res struct {
		Warning string `json:"warning"`
	}
	b.must(&res, "screenshot", map[string]any{"page": page, "path": path})
	if res.Warning != "" {
		b.t.Logf("screenshot %s not taken: %s", path, res.Warning)
	}
}

type cookie struct {
	Name     string  `json:"name"`
	Value    string  `json:"value"`
	Domain   string  `json:"domain"`
	Path     string  `json:"path"`
	Expires  float64 `json:"expires"`
	HTTPOnly bool    `json:"httpOnly"`
	Secure   bool    `json:"secure"`
	SameSite string  `json:"sameSite"`
}

func (b *browser) cookies(ctx string) map[string]cookie {
	b.t.Helper()
	var r struct {
		Cookies []cookie `json:"cookies"`
	}
	b.must(&r, "cookies", map[string]any{"ctx": ctx})
	m := map[string]cookie{}
	for _, c := range r.Cookies {
		m[c.Name] = c
	}
	return m
}

// throttle slows page's CPU rate× (CDP Emulation.setCPUThrottlingRate).
func (b *browser) throttle(page string, rate float64) {
	b.t.Helper()
	b.must(nil, "throttle", map[string]any{"page": page, "rate": rate})
}

func (b *browser) addCookie(ctx string, c cookie) {
	b.t.Helper()
	b.must(nil, "addCookies", map[string]any{"ctx": ctx, "cookies": []cookie{c}})
}
