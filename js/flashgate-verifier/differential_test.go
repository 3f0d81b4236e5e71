package verifierjs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testing/tokencases"
	"github.com/flashgate/flashgate/internal/testing/wasmbuild"
	"github.com/flashgate/flashgate/verifier"
)

// The differential tests run the package in Node, through ONE long-lived
// node process per test binary (each fuzz worker is its own test binary, so
// has its own): test/diff_driver.mjs reads newline-delimited JSON requests
// and answers each with the result of a crypto "host" and a crypto "pure"
// Verifier. Every answer must equal the native verifier's: the code name,
// and the claims of an accepted token.

func TestMain(m *testing.M) {
	code := m.Run()
	stopDriver()
	wasmbuild.Cleanup()
	os.Exit(code)
}

// request is one line to diff_driver.mjs; Now is Unix seconds.
type request struct {
	Token   string `json:"token"`
	Product string `json:"product"`
	User    string `json:"user"`
	Now     int64  `json:"now"`
}

type response struct {
	Host      jsAnswer `json:"host"`      // node:crypto in Node
	WebCrypto jsAnswer `json:"webcrypto"` // crypto.subtle
	Pure      jsAnswer `json:"pure"`
}

// driver is the node child running test/diff_driver.mjs.
type driver struct {
	mu      sync.Mutex
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan []byte // stdout lines; closed at EOF
	stderr  *syncBuffer
	exited  chan struct{}
	broken  error
	runtime string
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 1<<20 {
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

const driverTimeout = 60 * time.Second

var (
	driverOnce sync.Once
	theDriver  *driver
	driverErr  error
)

// nodeDriver returns the test binary's driver, starting it on first use.
func nodeDriver(tb testing.TB) *driver {
	tb.Helper()
	wasm := wasmbuild.Path(tb) // outside the Once: it may end the calling test
	driverOnce.Do(func() { theDriver, driverErr = startDriver(wasm) })
	if driverErr != nil {
		tb.Fatalf("diff_driver.mjs: %v", driverErr)
	}
	return theDriver
}

func startDriver(wasm string) (*driver, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node (≥ 20) is required: %v", err)
	}
	cases, err := filepath.Abs(tokencases.GoldenPath(2))
	if err != nil {
		return nil, err
	}
	d := &driver{
		cmd:    exec.Command(node, filepath.Join("test", "diff_driver.mjs"), cases, wasm),
		lines:  make(chan []byte, 16),
		stderr: &syncBuffer{},
		exited: make(chan struct{}),
	}
	d.cmd.Stderr = d.stderr
	if d.stdin, err = d.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		r := bufio.NewReaderSize(stdout, 1<<16)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 && err == nil {
				d.lines <- line
			}
			if err != nil {
				close(d.lines)
				return
			}
		}
	}()
	go func() { _ = d.cmd.Wait(); close(d.exited) }()

	var hello struct {
		Ready   bool   `json:"ready"`
		Runtime string `json:"runtime"`
		Crypto  struct {
			Host      string `json:"host"`
			WebCrypto string `json:"webcrypto"`
			Pure      string `json:"pure"`
		} `json:"crypto"`
	}
	line, err := d.readLine()
	if err == nil {
		err = json.Unmarshal(line, &hello)
	}
	if err != nil || !hello.Ready {
		d.stop()
		return nil, fmt.Errorf("no ready line (%v): %s\nstderr:\n%s", err, line, d.stderr.String())
	}
	if hello.Crypto.Host != "node:crypto" || hello.Crypto.WebCrypto != "webcrypto" || hello.Crypto.Pure != "wasm" {
		d.stop()
		return nil, fmt.Errorf(`%s: Verifier.provider is %q, %q, %q; want node:crypto, webcrypto, wasm`,
			hello.Runtime, hello.Crypto.Host, hello.Crypto.WebCrypto, hello.Crypto.Pure)
	}
	d.runtime = hello.Runtime
	return d, nil
}

func (d *driver) readLine() ([]byte, error) {
	select {
	case line, ok := <-d.lines:
		if !ok {
			return nil, errors.New("node exited")
		}
		return line, nil
	case <-time.After(driverTimeout):
		return nil, fmt.Errorf("no answer within %v", driverTimeout)
	}
}

// ask sends req and returns the answer.
func (d *driver) ask(req request) (response, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var resp response
	if d.broken != nil {
		return resp, d.broken
	}
	line, err := json.Marshal(req)
	if err != nil {
		return resp, err
	}
	if _, err := d.stdin.Write(append(line, '\n')); err != nil {
		d.broken = fmt.Errorf("write: %v\nstderr:\n%s", err, d.stderr.String())
		return resp, d.broken
	}
	out, err := d.readLine()
	if err == nil {
		err = json.Unmarshal(out, &resp)
	}
	if err != nil {
		d.broken = fmt.Errorf("%v: %.500s\nstderr:\n%s", err, out, d.stderr.String())
		return resp, d.broken
	}
	return resp, nil
}

// stop closes node's stdin (it exits at EOF) and kills it if it lingers.
func (d *driver) stop() {
	_ = d.stdin.Close()
	select {
	case <-d.exited:
	case <-time.After(5 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

func stopDriver() {
	if theDriver != nil {
		theDriver.stop()
	}
}

// differ compares the package (both paths) with the native verifier on the
// table's keys and configuration (the base case's: leeway 0).
type differ struct {
	set  *tokencases.Set
	base tokencases.Case
	v    *verifier.Verifier
	now  int64 // the native verifier's clock, Unix seconds
	d    *driver
}

func newDiffer(tb testing.TB) *differ {
	tb.Helper()
	set := tokencases.MustLoad(tb, tokencases.GoldenPath(2))
	base := set.Base(tb)
	df := &differ{set: set, base: base, now: base.Now}
	cfg := set.Config(base)
	cfg.Now = func() time.Time { return time.Unix(df.now, 0) }
	df.v = tokencases.Verifier(tb, set, cfg)
	df.d = nodeDriver(tb)
	return df
}

// canonical returns req as the JS side sees it: JSON carries strings as
// valid UTF-8 (each invalid byte becomes U+FFFD), as any JS string would.
func canonical(req request) request {
	b, err := json.Marshal(req)
	if err != nil {
		panic(err)
	}
	var out request
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

func quote(s string) string {
	if len(s) > 4200 {
		return fmt.Sprintf("%q… (%d bytes)", s[:4200], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// check verifies req natively and in the package; any difference fails tb.
// It returns the native code.
func (df *differ) check(tb testing.TB, req request) verifier.Code {
	tb.Helper()
	req = canonical(req)
	df.now = req.Now
	tok, err := df.v.Verify(context.Background(), req.Token, verifier.Expect{Product: req.Product, User: req.User})
	native := verifier.CodeOf(err)
	var wc *tokencases.Claims
	if native == verifier.CodeOK {
		c := tokencases.ClaimsOf(tok)
		wc = &c
	}
	resp, err := df.d.ask(req)
	if err != nil {
		tb.Fatalf("diff_driver.mjs: %v", err)
	}
	for _, p := range []struct {
		name string
		a    jsAnswer
	}{{"host (node:crypto)", resp.Host}, {"host (webcrypto)", resp.WebCrypto}, {"pure", resp.Pure}} {
		if m := mismatch(p.a, native.String(), wc); m != "" {
			tb.Fatalf("token %s, product %q, user %q, now %d: package (%s, %s) %s; native %v (%v)",
				quote(req.Token), req.Product, req.User, req.Now, df.d.runtime, p.name, m, native, err)
		}
	}
	return native
}

// TestPackageMutationsDifferential: the base token, deterministic random
// mutations of it, and every token of the case table (with the base case's
// expectations, and with the case's own when its leeway is 0) get the same
// answer from the package, on both crypto paths, as from the native verifier.
func TestPackageMutationsDifferential(t *testing.T) {
	df := newDiffer(t)
	b := df.base
	at := func(tok string) request { return request{tok, b.Product, b.User, b.Now} }
	if got := df.check(t, at(b.Token)); got != verifier.CodeOK {
		t.Fatalf("the base token is refused: %v", got)
	}
	start := time.Now()
	r := rand.New(rand.NewPCG(2026, 11))
	codes := map[verifier.Code]int{}
	const n = 10000
	for range n {
		codes[df.check(t, at(tokencases.Mutate(r, b.Token)))]++
	}
	t.Logf("%s: %d mutations agree in %v: %v", df.d.runtime, n, time.Since(start).Round(time.Millisecond), codes)
	if len(codes) < 4 {
		t.Errorf("mutations reached only %d result codes: %v", len(codes), codes)
	}

	start = time.Now()
	tableCodes := map[verifier.Code]int{}
	for _, c := range df.set.Cases {
		df.check(t, at(c.Token))
		if c.Leeway == 0 {
			got := df.check(t, request{c.Token, c.Product, c.User, c.Now})
			if got != c.Want {
				t.Errorf("%s: native %v, the table wants %v", c.Name, got, c.Want)
			}
			tableCodes[got]++
		}
	}
	t.Logf("%d case-table tokens agree in %v: %v", len(df.set.Cases), time.Since(start).Round(time.Millisecond), tableCodes)
}

// FuzzPackageDifferential: any token, product, user and clock skew (from
// the base case's now) get the same answer from the package, on both crypto
// paths, as from the native verifier.
//
//	go test -run '^$' -fuzz FuzzPackageDifferential ./js/flashgate-verifier/
func FuzzPackageDifferential(f *testing.F) {
	df := newDiffer(f)
	b := df.base
	f.Add(b.Token, b.Product, b.User, int16(0))
	f.Add(b.Token, b.Product, "", int16(-61))
	f.Add(b.Token, "", b.User, int16(240))
	f.Add(b.Token, b.Product+"\x00", b.User+"é", int16(300))
	for _, c := range df.set.Cases {
		if len(c.Token) > 2*verifier.MaxTokenSize || c.Leeway != 0 {
			continue
		}
		skew := c.Now - b.Now
		if skew != int64(int16(skew)) {
			skew = 0
		}
		f.Add(c.Token, c.Product, c.User, int16(skew))
	}
	f.Fuzz(func(t *testing.T, tok, product, user string, skew int16) {
		df.check(t, request{tok, product, user, b.Now + int64(skew)})
	})
}
