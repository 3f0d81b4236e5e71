package verifier

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWycheproofEd25519 runs C2SP/wycheproof testvectors_v1/ed25519_test.json
// through the signature layer (verifySignature: length check, strict
// base64url, crypto/ed25519), the same code path Verify uses.
func TestWycheproofEd25519(t *testing.T) {
	path := filepath.Join("testdata", "wycheproof", "ed25519_test.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("Wycheproof vectors missing at %s: %v", path, err)
	}
	var file struct {
		NumberOfTests int `json:"numberOfTests"`
		TestGroups    []struct {
			PublicKey struct {
				PK string `json:"pk"`
			} `json:"publicKey"`
			Tests []struct {
				TcID    int      `json:"tcId"`
				Comment string   `json:"comment"`
				Msg     string   `json:"msg"`
				Sig     string   `json:"sig"`
				Result  string   `json:"result"`
				Flags   []string `json:"flags"`
			} `json:"tests"`
		} `json:"testGroups"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range file.TestGroups {
		pk, err := hex.DecodeString(g.PublicKey.PK)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range g.Tests {
			n++
			msg, err1 := hex.DecodeString(tc.Msg)
			sig, err2 := hex.DecodeString(tc.Sig)
			if err1 != nil || err2 != nil {
				t.Fatalf("tc %d: bad hex", tc.TcID)
			}
			err := verifySignature(pk, msg, base64.RawURLEncoding.EncodeToString(sig))
			switch tc.Result {
			case "valid":
				if err != nil {
					t.Errorf("tc %d (%s %v): valid signature refused: %v", tc.TcID, tc.Comment, tc.Flags, err)
				}
			case "invalid":
				if !errors.Is(err, ErrBadSignature) {
					t.Errorf("tc %d (%s %v): invalid signature: got %v", tc.TcID, tc.Comment, tc.Flags, err)
				}
			default: // "acceptable": either answer, but no panic
			}
		}
	}
	if n != file.NumberOfTests {
		t.Fatalf("ran %d tests, file declares %d", n, file.NumberOfTests)
	}
	t.Logf("%d Wycheproof Ed25519 vectors", n)
}

// TestRFC8037A4 verifies RFC 8037 A.4 with the A.2 key through the
// signature layer (its payload is not JSON, so Verify itself refuses it).
func TestRFC8037A4(t *testing.T) {
	const jws = "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc.hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg"
	pub, err := base64.RawURLEncoding.DecodeString("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
	if err != nil {
		t.Fatal(err)
	}
	dot := strings.LastIndexByte(jws, '.')
	if err := verifySignature(pub, []byte(jws[:dot]), jws[dot+1:]); err != nil {
		t.Fatalf("RFC 8037 A.4: %v", err)
	}
	// The header decodes with our scanner; alg is EdDSA.
	var buf [64]byte
	n, ok := decodeSegment(buf[:], jws[:strings.IndexByte(jws, '.')])
	if !ok || string(buf[:n]) != `{"alg":"EdDSA"}` {
		t.Fatalf("header %q", buf[:n])
	}
	// One flipped bit anywhere in the signing input fails.
	in := []byte(jws[:dot])
	in[5] ^= 1
	if err := verifySignature(pub, in, jws[dot+1:]); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("tampered: %v", err)
	}
	// Non-canonical trailing bits on the same 64 bytes are refused.
	sigSeg := jws[dot+1:]
	last := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", sigSeg[len(sigSeg)-1])
	alt := sigSeg[:len(sigSeg)-1] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[last|1])
	if err := verifySignature(pub, []byte(jws[:dot]), alt); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("trailing bits: %v", err)
	}
}

// FuzzDecodeSegment: decodeSegment agrees with
// base64.RawURLEncoding.Strict() on every input without '\r' or '\n'
// (which encoding/base64 silently skips and we refuse).
func FuzzDecodeSegment(f *testing.F) {
	for _, s := range []string{"", "A", "AA", "AB", "AAA", "AAB", "AAAA", "eyJhbGciOiJFZERTQSJ9", "a+b/", "ab==", "Zm9v\n"} {
		f.Add(s)
	}
	strict := base64.RawURLEncoding.Strict()
	f.Fuzz(func(t *testing.T, s string) {
		buf := make([]byte, len(s))
		n, ok := decodeSegment(buf, s)
		want, err := strict.DecodeString(s)
		if strings.ContainsAny(s, "\r\n") {
			if ok {
				t.Fatalf("accepted %q", s)
			}
			return
		}
		if ok != (err == nil) {
			t.Fatalf("%q: ours ok=%v, stdlib err=%v", s, ok, err)
		}
		if ok && string(buf[:n]) != string(want) {
			t.Fatalf("%q: %x vs %x", s, buf[:n], want)
		}
	})
}

// FuzzJSONObject: whatever the scanner accepts is valid JSON to
// encoding/json, an object, without duplicate top-level names; and
// unescaped names/values match encoding/json's decoding.
func FuzzJSONObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":1,"a":2}`, `{"\u0061":"x\ud83d\ude00","b":[1,{"c":null}]}`,
		`{"a":1.5e-3,"b":true,"c":false}`, ` {"a" : "b"} `, `{"a":"\ud800"}`, `[1]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var mem [maxMembers]member
		members, err := parseTopObject(b, mem[:0])
		if err != nil {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("accepted %q, encoding/json: %v", b, err)
		}
		if len(m) != len(members) {
			t.Fatalf("%q: %d members, encoding/json sees %d distinct", b, len(members), len(m))
		}
		var scratch [32]byte
		for k := range members {
			name := string(nameOf(b, &members[k], &scratch))
			raw, ok := m[name]
			if !ok {
				t.Fatalf("%q: name %q unknown to encoding/json", b, name)
			}
			if members[k].kind == kindString {
				var s string
				if err := json.Unmarshal(raw, &s); err != nil || s != stringValue(b, &members[k]) {
					t.Fatalf("%q: value %q vs %q", b, stringValue(b, &members[k]), s)
				}
			}
		}
	})
}

func TestIntValue(t *testing.T) {
	for s, want := range map[string]int64{"1": 1, "9007199254740991": 1<<53 - 1, "1763680300": 1763680300} {
		b := []byte(`{"n":` + s + `}`)
		var mem [4]member
		ms, err := parseTopObject(b, mem[:0])
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := intValue(b, &ms[0]); !ok || got != want {
			t.Errorf("%s: %d %v", s, got, ok)
		}
	}
	for _, s := range []string{"0", "-1", "-0", "1.0", "1e3", "9007199254740992", "12345678901234567890", `"1"`, "null"} {
		b := []byte(`{"n":` + s + `}`)
		var mem [4]member
		ms, err := parseTopObject(b, mem[:0])
		if err != nil {
			t.Fatal(s, err)
		}
		if _, ok := intValue(b, &ms[0]); ok {
			t.Errorf("%s accepted", s)
		}
	}
	_ = ed25519.PublicKeySize
}
