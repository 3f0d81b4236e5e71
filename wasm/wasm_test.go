package main

// These tests drive the TinyGo-built module (ABI v2, README.md) with wazero,
// the way an edge host would. They run under plain `go test`: the module is
// built with scripts/build-wasm.sh into a temporary directory, or read from
// $FLASHGATE_WASM when set. Without TinyGo (scripts/install-tinygo.sh) they
// fail; they do not skip.

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/testkit"
	"github.com/flashgate/flashgate/internal/testing/tokencases"
	"github.com/flashgate/flashgate/internal/testing/wasmbuild"
	"github.com/flashgate/flashgate/verifier"
)

// Glue status codes (main_tinygo.go, README.md).
const (
	statusBadArgumentT = 100
	statusBadKeysT     = 101
	statusBadConfigT   = 102
	statusNotReadyT    = 103
	statusStaleHandleT = 104

	statusCheckSignatureT = 200
	pendingSlotsT         = 256
)

// moduleBytes returns the module: $FLASHGATE_WASM or one TinyGo build per
// test binary (internal/testing/wasmbuild).
func moduleBytes(tb testing.TB) []byte {
	tb.Helper()
	b, err := os.ReadFile(wasmbuild.Path(tb))
	if err != nil {
		tb.Fatalf("reading the wasm module: %v", err)
	}
	return b
}

func TestMain(m *testing.M) {
	code := m.Run()
	wasmbuild.Cleanup()
	os.Exit(code)
}

var (
	compileOnce sync.Once
	runtime     wazero.Runtime
	compiled    wazero.CompiledModule
	compileErr  error
)

// host is one module instance plus the host-side helpers of README.md.
type host struct {
	tb  testing.TB
	ctx context.Context
	mod api.Module

	abiVersion, alloc, free, setKeys, configure, verify, resultPtr, resultLen api.Function
	verifyBegin, verifyFinish                                                 api.Function
}

func newHost(tb testing.TB) *host {
	tb.Helper()
	bin := moduleBytes(tb)
	ctx := context.Background()
	compileOnce.Do(func() {
		runtime = wazero.NewRuntime(ctx)
		compiled, compileErr = runtime.CompileModule(ctx, bin)
	})
	if compileErr != nil {
		tb.Fatalf("compiling the module: %v", compileErr)
	}
	// No host modules: the module must instantiate with no imports, like
	// `new WebAssembly.Instance(module, {})` in workerd. _initialize is the
	// reactor's start function.
	mod, err := runtime.InstantiateModule(ctx, compiled,
		wazero.NewModuleConfig().WithName("").WithStartFunctions("_initialize"))
	if err != nil {
		tb.Fatalf("instantiating the module: %v", err)
	}
	tb.Cleanup(func() { mod.Close(ctx) })
	h := &host{tb: tb, ctx: ctx, mod: mod}
	for name, f := range map[string]*api.Function{
		"abi_version": &h.abiVersion, "alloc": &h.alloc, "free": &h.free,
		"set_keys": &h.setKeys, "configure": &h.configure, "verify": &h.verify,
		"result_ptr": &h.resultPtr, "result_len": &h.resultLen,
		"verify_begin": &h.verifyBegin, "verify_finish": &h.verifyFinish,
	} {
		if *f = mod.ExportedFunction(name); *f == nil {
			tb.Fatalf("module does not export %s", name)
		}
	}
	return h
}

func (h *host) call(f api.Function, args ...uint64) uint32 {
	h.tb.Helper()
	res, err := f.Call(h.ctx, args...)
	if err != nil {
		h.tb.Fatalf("%s: %v", f.Definition().Name(), err)
	}
	if len(res) == 0 {
		return 0
	}
	return uint32(res[0])
}

// put copies s into a fresh module buffer; (0, 0) for an empty s.
func (h *host) put(s string) (ptr, n uint64) {
	h.tb.Helper()
	if s == "" {
		return 0, 0
	}
	p := h.call(h.alloc, uint64(len(s)))
	if p == 0 {
		h.tb.Fatalf("alloc(%d) returned 0", len(s))
	}
	if !h.mod.Memory().WriteString(p, s) {
		h.tb.Fatalf("writing %d bytes at %#x: out of range", len(s), p)
	}
	return uint64(p), uint64(len(s))
}

func (h *host) release(ptrs ...uint64) {
	for _, p := range ptrs {
		if p != 0 {
			h.call(h.free, p)
		}
	}
}

func (h *host) result() string {
	h.tb.Helper()
	p, n := h.call(h.resultPtr), h.call(h.resultLen)
	if n == 0 {
		return ""
	}
	b, ok := h.mod.Memory().Read(p, n)
	if !ok {
		h.tb.Fatalf("result (%#x, %d) out of range", p, n)
	}
	return string(b)
}

// input calls f (set_keys or configure) with s and returns status and result.
func (h *host) input(f api.Function, s string) (uint32, string) {
	h.tb.Helper()
	p, n := h.put(s)
	defer h.release(p)
	return h.call(f, p, n), h.result()
}

func (h *host) mustSetKeys(jwks string) {
	h.tb.Helper()
	if st, msg := h.input(h.setKeys, jwks); st != 0 {
		h.tb.Fatalf("set_keys = %d (%s)", st, msg)
	}
}

func (h *host) mustConfigure(cfg string) {
	h.tb.Helper()
	if st, msg := h.input(h.configure, cfg); st != 0 {
		h.tb.Fatalf("configure = %d (%s)", st, msg)
	}
}

// check runs verify and returns the status and the result buffer.
func (h *host) check(tok, product, user string, now int64) (uint32, string) {
	h.tb.Helper()
	tp, tn := h.put(tok)
	pp, pn := h.put(product)
	up, un := h.put(user)
	defer h.release(tp, pp, up)
	st := h.call(h.verify, tp, tn, pp, pn, up, un, uint64(now))
	return st, h.result()
}

// record is verify_begin's request to the host (README.md, ABI v2).
type record struct {
	handle uint64
	key    ed25519.PublicKey
	sig    []byte
	input  string
}

func parseRecord(tb testing.TB, res string) record {
	tb.Helper()
	if len(res) < 4+32+64 {
		tb.Fatalf("verify_begin record has %d bytes, want ≥ 100", len(res))
	}
	b := []byte(res)
	return record{
		handle: uint64(binary.LittleEndian.Uint32(b)),
		key:    ed25519.PublicKey(b[4:36]),
		sig:    b[36:100],
		input:  res[100:],
	}
}

// begin runs verify_begin and returns its status and result.
func (h *host) begin(tok, product, user string, now int64) (uint32, string) {
	h.tb.Helper()
	tp, tn := h.put(tok)
	pp, pn := h.put(product)
	up, un := h.put(user)
	defer h.release(tp, pp, up)
	return h.call(h.verifyBegin, tp, tn, pp, pn, up, un, uint64(now)), h.result()
}

// finish runs verify_finish and returns its status and result.
func (h *host) finish(handle uint64, valid bool) (uint32, string) {
	h.tb.Helper()
	v := uint64(0)
	if valid {
		v = 1
	}
	return h.call(h.verifyFinish, handle, v), h.result()
}

// checkHostCrypto is check through the host-crypto path: verify_begin, the
// host's Ed25519 (here crypto/ed25519, as WebCrypto would), verify_finish.
func (h *host) checkHostCrypto(tok, product, user string, now int64) (uint32, string) {
	h.tb.Helper()
	st, res := h.begin(tok, product, user, now)
	if st != statusCheckSignatureT {
		return st, res
	}
	r := parseRecord(h.tb, res)
	return h.finish(r.handle, ed25519.Verify(r.key, []byte(r.input), r.sig))
}

// paths are the module's two ways to verify: every table-driven test runs both.
var paths = []struct {
	name  string
	check func(h *host, tok, product, user string, now int64) (uint32, string)
}{
	{"pure", (*host).check},
	{"host-crypto", (*host).checkHostCrypto},
}

// decodeClaims parses the claims JSON of a successful verify (README.md).
func decodeClaims(tb testing.TB, s string) tokencases.Claims {
	tb.Helper()
	c, err := tokencases.DecodeClaims([]byte(s))
	if err != nil {
		tb.Fatalf("result %q is not the claims JSON: %v", s, err)
	}
	return c
}

// ---- hand-signed tokens -------------------------------------------------------

const (
	testIssuer   = "https://issuer.flashgate.test"
	testAudience = "edge"
	testProduct  = "drop-42"
	testUser     = "user-7"
	testIAT      = int64(1763680000)
	testEXP      = testIAT + 300
)

var b64 = base64.RawURLEncoding

// testKey is the deterministic signer for label.
func testKey(label string) *testkit.Signer { return testkit.SignerFor("flashgate wasm test: " + label) }

func jwksOf(labels ...string) string {
	var signers []*testkit.Signer
	for _, l := range labels {
		signers = append(signers, testKey(l))
	}
	return string(testkit.JWKS(signers...))
}

func sign(label, payload string) string { return testKey(label).SignPayload([]byte(payload)) }

func payload(jti string, iat, exp int64) string {
	return string(flashgate.NewClaims(testIssuer, testAudience, testUser, testProduct, jti,
		time.Unix(iat, 0), time.Unix(exp, 0)).JSON())
}

const testConfig = "iss=" + testIssuer + "\naud=" + testAudience + "\nleeway=5\nmax_lifetime=900\n"

func readyHost(tb testing.TB) *host {
	h := newHost(tb)
	h.mustSetKeys(jwksOf("a"))
	h.mustConfigure(testConfig)
	return h
}

// ---- tests ---------------------------------------------------------------------------

func TestWasmABI(t *testing.T) {
	h := newHost(t)
	if v := h.call(h.abiVersion); v != 2 {
		t.Fatalf("abi_version = %d, want 2", v)
	}
	for _, p := range paths {
		if st, _ := p.check(h, sign("a", payload("j", testIAT, testEXP)), testProduct, "", testIAT); st != statusNotReadyT {
			t.Errorf("%s: verify before set_keys/configure = %d, want %d (not_ready)", p.name, st, statusNotReadyT)
		}
	}
	if p := h.call(h.alloc, 0); p != 0 {
		t.Errorf("alloc(0) = %#x, want 0", p)
	}
	if st := h.call(h.verify, 1, 17<<20, 0, 0, 0, 0, uint64(testIAT)); st != statusBadArgumentT {
		t.Errorf("verify with a 17 MiB length = %d, want %d (bad_argument)", st, statusBadArgumentT)
	}
	h.call(h.free, 0)           // no-op
	h.call(h.free, 0x7fff_fff0) // unknown pointer: no-op

	if st, msg := h.input(h.setKeys, `{"keys":[]}`); st != statusBadKeysT || msg == "" {
		t.Errorf("set_keys(empty set) = %d %q, want %d and a message", st, msg, statusBadKeysT)
	}
	for _, cfg := range []string{
		"aud=" + testAudience,                        // no iss
		"iss=" + testIssuer + "\naud=x\nleeway=61",   // leeway > 60 s
		"iss=" + testIssuer + "\naud=x\nleeway=-1",   // negative
		"iss=" + testIssuer + "\naud=x\nleeway=1.5",  // not whole seconds
		"iss=" + testIssuer + "\naud=x\ncolour=blue", // unknown field
		"iss", // no '='
	} {
		if st, msg := h.input(h.configure, cfg); st != statusBadConfigT || msg == "" {
			t.Errorf("configure(%q) = %d %q, want %d and a message", cfg, st, msg, statusBadConfigT)
		}
	}
	h.mustSetKeys(jwksOf("a"))
	h.mustConfigure("iss=" + testIssuer + "\r\naud=" + testAudience + "\r\n\r\nproduct=" + testProduct + "\r\n")
	// product comes from the configuration when verify's product is empty.
	if st, msg := h.check(sign("a", payload("j", testIAT, testEXP)), "", "", testIAT+1); st != 0 {
		t.Errorf("verify with configured product = %d (%s), want 0", st, msg)
	}
}

func TestWasmVerify(t *testing.T) {
	h := readyHost(t)
	valid := sign("a", payload("adm-1", testIAT, testEXP))

	st, res := h.check(valid, testProduct, testUser, testIAT+10)
	if st != 0 {
		t.Fatalf("valid token: code %d (%s), want 0", st, res)
	}
	kid := testKey("a").Kid
	want := tokencases.Claims{KeyID: kid, Issuer: testIssuer, Audience: testAudience, User: testUser, Product: testProduct,
		ID: "adm-1", IssuedAt: testIAT, ExpiresAt: testEXP}
	if got := decodeClaims(t, res); got != want {
		t.Errorf("claims = %+v, want %+v", got, want)
	}

	// Tampered: flip one payload character, keep the signature.
	parts := strings.Split(valid, ".")
	pl, _ := b64.DecodeString(parts[1])
	tampered := parts[0] + "." + b64.EncodeToString([]byte(strings.Replace(string(pl), "adm-1", "adm-2", 1))) + "." + parts[2]
	cases := []struct {
		name          string
		tok, prod, us string
		now           int64
		want          verifier.Code
	}{
		{"tampered", tampered, testProduct, "", testIAT + 10, verifier.CodeBadSignature},
		{"expired", valid, testProduct, "", testEXP + 5, verifier.CodeExpired},
		{"within leeway", valid, testProduct, "", testEXP + 4, verifier.CodeOK},
		{"not yet valid", valid, testProduct, "", testIAT - 6, verifier.CodeNotYetValid},
		{"wrong user", valid, testProduct, "someone-else", testIAT, verifier.CodeBadUser},
		{"wrong product", valid, "drop-43", "", testIAT, verifier.CodeBadProduct},
		{"unknown key", sign("b", payload("adm-1", testIAT, testEXP)), testProduct, "", testIAT, verifier.CodeUnknownKey},
		{"garbage", "not.a.token!", testProduct, "", testIAT, verifier.CodeMalformed},
		{"empty", "", testProduct, "", testIAT, verifier.CodeMalformed},
		{"too large", strings.Repeat("a", verifier.MaxTokenSize+1), testProduct, "", testIAT, verifier.CodeTooLarge},
	}
	for _, p := range paths {
		for _, c := range cases {
			st, res := p.check(h, c.tok, c.prod, c.us, c.now)
			if verifier.Code(st) != c.want {
				t.Errorf("%s %s: code %d %v (%s), want %d %v", p.name, c.name, st, verifier.Code(st), res, c.want, c.want)
			}
			if st != 0 && res == "" {
				t.Errorf("%s %s: no diagnostic message", p.name, c.name)
			}
		}
	}
}

// TestWasmHostCryptoABI: verify_begin's record is exactly the key the kid
// names, the decoded signature and the raw signing input; verify_finish
// gives the final code, takes its handle once, and keeps interleaved
// verifications apart; a host that never finishes leaks nothing.
func TestWasmHostCryptoABI(t *testing.T) {
	h := readyHost(t)
	valid := sign("a", payload("adm-1", testIAT, testEXP))
	expired := sign("a", payload("adm-2", testIAT-1000, testIAT-700))
	dot := strings.LastIndexByte(valid, '.')

	st, res := h.begin(valid, testProduct, testUser, testIAT+10)
	if st != statusCheckSignatureT {
		t.Fatalf("verify_begin(valid) = %d (%s), want %d", st, res, statusCheckSignatureT)
	}
	r := parseRecord(t, res)
	if !r.key.Equal(testKey("a").Key.Public()) {
		t.Errorf("record key %x, want the JWKS key of kid %s", []byte(r.key), testKey("a").Kid)
	}
	if r.input != valid[:dot] {
		t.Errorf("record signing input %q, want %q", r.input, valid[:dot])
	}
	if wantSig, _ := b64.DecodeString(valid[dot+1:]); string(r.sig) != string(wantSig) {
		t.Errorf("record signature %x, want %x", r.sig, wantSig)
	}

	// Interleaved: begin the expired token, finish it before the valid one.
	st, res = h.begin(expired, testProduct, testUser, testIAT+10)
	if st != statusCheckSignatureT {
		t.Fatalf("verify_begin(expired) = %d (%s), want %d: the signature comes first", st, res, statusCheckSignatureT)
	}
	r2 := parseRecord(t, res)
	if st, res := h.finish(r2.handle, true); verifier.Code(st) != verifier.CodeExpired {
		t.Errorf("finish(expired, valid) = %d (%s), want expired", st, res)
	}
	if st, res := h.finish(r.handle, true); st != 0 || decodeClaims(t, res).ID != "adm-1" {
		t.Errorf("finish(valid, valid) = %d (%s), want 0 with jti adm-1", st, res)
	}
	// A handle is taken once.
	if st, _ := h.finish(r.handle, true); st != statusStaleHandleT {
		t.Errorf("second finish = %d, want %d (stale_handle)", st, statusStaleHandleT)
	}
	for _, hd := range []uint64{0, 12345} {
		if st, _ := h.finish(hd, true); st != statusStaleHandleT {
			t.Errorf("finish(%d) = %d, want %d (stale_handle)", hd, st, statusStaleHandleT)
		}
	}
	// Precedence: a bad signature wins over a claim failure.
	_, res = h.begin(expired, testProduct, testUser, testIAT+10)
	if st, _ := h.finish(parseRecord(t, res).handle, false); verifier.Code(st) != verifier.CodeBadSignature {
		t.Errorf("finish(expired, invalid) = %d, want bad_signature", st)
	}
	// Claims are judged at verify_begin's now.
	_, res = h.begin(valid, testProduct, testUser, testEXP+100)
	if st, _ := h.finish(parseRecord(t, res).handle, true); verifier.Code(st) != verifier.CodeExpired {
		t.Errorf("finish of a begin after exp = %d, want expired", st)
	}

	// Never finished: the slot is reused pendingSlots begins later.
	_, res = h.begin(valid, testProduct, testUser, testIAT+10)
	first := parseRecord(t, res).handle
	var last uint64
	for range pendingSlotsT {
		_, res = h.begin(valid, testProduct, testUser, testIAT+10)
		last = parseRecord(t, res).handle
	}
	if st, _ := h.finish(first, true); st != statusStaleHandleT {
		t.Errorf("finish of a handle %d begins old = %d, want %d (stale_handle)", pendingSlotsT, st, statusStaleHandleT)
	}
	if st, _ := h.finish(last, true); st != 0 {
		t.Errorf("finish of the newest handle = %d, want 0", st)
	}
}

func TestWasmKeyRotation(t *testing.T) {
	h := readyHost(t)
	tokA := sign("a", payload("j", testIAT, testEXP))
	tokB := sign("b", payload("j", testIAT, testEXP))
	expect := func(step, tok string, want verifier.Code) {
		t.Helper()
		if st, res := h.check(tok, testProduct, "", testIAT); verifier.Code(st) != want {
			t.Errorf("%s: code %d (%s), want %v", step, st, res, want)
		}
	}
	expect("a before rotation", tokA, verifier.CodeOK)
	expect("b before rotation", tokB, verifier.CodeUnknownKey)
	h.mustSetKeys(jwksOf("a", "b"))
	expect("a during rotation", tokA, verifier.CodeOK)
	expect("b during rotation", tokB, verifier.CodeOK)
	h.mustSetKeys(jwksOf("b"))
	expect("a after rotation", tokA, verifier.CodeUnknownKey)
	expect("b after rotation", tokB, verifier.CodeOK)
	// A rejected JWKS keeps the previous keys.
	if st, _ := h.input(h.setKeys, `{"keys":`); st != statusBadKeysT {
		t.Errorf("set_keys(truncated) = %d, want %d", st, statusBadKeysT)
	}
	expect("b after a rejected set_keys", tokB, verifier.CodeOK)
	// A rejected configuration keeps the previous one.
	if st, _ := h.input(h.configure, "iss=x"); st != statusBadConfigT {
		t.Errorf("configure(no aud) = %d, want %d", st, statusBadConfigT)
	}
	expect("b after a rejected configure", tokB, verifier.CodeOK)
}

// TestWasmTokenCases runs the shared case table (the golden file
// internal/testing/tokencases/testdata/cases.json) through the native verifier and
// the module and requires the same code and claims from both.
func TestWasmTokenCases(t *testing.T) {
	set := tokencases.MustLoad(t, tokencases.GoldenPath(1))
	keys := set.Keys(t)
	h := newHost(t)
	h.mustSetKeys(string(set.JWKS))
	ctx := context.Background()
	for _, c := range set.Cases {
		v, err := verifier.New(keys, set.Config(c))
		if err != nil {
			t.Fatalf("%s: verifier.New: %v", c.Name, err)
		}
		tok, nerr := v.Verify(ctx, c.Token, c.Expect())
		native := verifier.CodeOf(nerr)

		h.mustConfigure("iss=" + set.Issuer + "\naud=" + set.Audience + "\nleeway=" + strconv.FormatInt(c.Leeway, 10))
		for _, p := range paths {
			st, res := p.check(h, c.Token, c.Product, c.User, c.Now)
			got := verifier.Code(st)
			if got != native || got != c.Want {
				t.Errorf("%s %s: wasm %v (%d: %s), native %v (%v), want %v", p.name, c.Name, got, st, res, native, nerr, c.Want)
				continue
			}
			if got != verifier.CodeOK {
				continue
			}
			wc := decodeClaims(t, res)
			if nc := tokencases.ClaimsOf(tok); wc != nc {
				t.Errorf("%s %s: wasm claims %+v, native %+v", p.name, c.Name, wc, nc)
			}
			if w := c.WantClaims; w != nil {
				if wc != *w {
					t.Errorf("%s %s: wasm claims %+v, want %+v", p.name, c.Name, wc, *w)
				}
			}
		}
	}
	t.Logf("%d cases agree on both paths", len(set.Cases))
}

// TestWasmMemory: 10,000 verifies (valid, tampered and expired, each with
// three alloc/free pairs, half of them through verify_begin/verify_finish)
// in one instance grow linear memory by ≤ 2 MiB.
func TestWasmMemory(t *testing.T) {
	const n, budget = 10_000, 2 << 20
	h := readyHost(t)
	valid := sign("a", payload("adm-1", testIAT, testEXP))
	tampered := valid[:len(valid)-2] + "AA"
	before := h.mod.Memory().Size()
	var trace []string
	for i := 0; i < n; i++ {
		tok, want := valid, verifier.CodeOK
		switch i % 4 {
		case 1:
			tok, want = tampered, verifier.CodeBadSignature
		case 2:
			tok = sign("a", payload("adm-"+strconv.Itoa(i), testIAT, testEXP))
		}
		p := paths[i/4%2] // both paths, each over all four kinds
		if st, res := p.check(h, tok, testProduct, testUser, testIAT+10); verifier.Code(st) != want {
			t.Fatalf("%s verify #%d: code %d (%s), want %v", p.name, i, st, res, want)
		}
		if i%1000 == 0 {
			// Key rotation churn too.
			h.mustSetKeys(jwksOf("a", "b"))
			trace = append(trace, strconv.Itoa(int(h.mod.Memory().Size()>>10)))
		}
	}
	after := h.mod.Memory().Size()
	growth := int64(after) - int64(before)
	t.Logf("linear memory: %d KiB after setup, %d KiB after %d verifies (growth %d KiB); every 1,000: %s KiB",
		before>>10, after>>10, n, growth>>10, strings.Join(trace, " "))
	if growth > budget {
		t.Errorf("linear memory grew by %d bytes over %d verifies, budget %d", growth, n, budget)
	}
}

// ---- benchmarks ----------------------------------------------------------------------

// BenchmarkWasmVerify measures one verify through the ABI, host-side copies
// included (three alloc/write/free, result read).
func BenchmarkWasmVerify(b *testing.B) {
	h := readyHost(b)
	tok := sign("a", payload("adm-1", testIAT, testEXP))
	b.ResetTimer()
	for b.Loop() {
		if st, _ := h.check(tok, testProduct, testUser, testIAT+10); st != 0 {
			b.Fatalf("code %d", st)
		}
	}
}

// BenchmarkWasmVerifyHostCrypto is BenchmarkWasmVerify through
// verify_begin/verify_finish, the host's Ed25519 being crypto/ed25519.
func BenchmarkWasmVerifyHostCrypto(b *testing.B) {
	h := readyHost(b)
	tok := sign("a", payload("adm-1", testIAT, testEXP))
	b.ResetTimer()
	for b.Loop() {
		if st, _ := h.checkHostCrypto(tok, testProduct, testUser, testIAT+10); st != 0 {
			b.Fatalf("code %d", st)
		}
	}
}

// BenchmarkNativeVerify is the same verification with the native verifier.
func BenchmarkNativeVerify(b *testing.B) {
	keys, err := verifier.ParseJWKS([]byte(jwksOf("a")))
	if err != nil {
		b.Fatal(err)
	}
	now := time.Unix(testIAT+10, 0)
	v, err := verifier.New(keys, verifier.Config{
		Issuer: testIssuer, Audience: testAudience, Leeway: 5 * time.Second,
		MaxLifetime: 900 * time.Second, Now: func() time.Time { return now },
	})
	if err != nil {
		b.Fatal(err)
	}
	tok := sign("a", payload("adm-1", testIAT, testEXP))
	ctx := context.Background()
	for b.Loop() {
		if _, err := v.Verify(ctx, tok, verifier.Expect{Product: testProduct, User: testUser}); err != nil {
			b.Fatal(err)
		}
	}
}
