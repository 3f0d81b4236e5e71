package edcache_test

import (
	"bufio"
	"compress/gzip"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"filippo.io/edwards25519"

	"github.com/flashgate/flashgate/keys/edcache"
)

// same checks the prepared key against crypto/ed25519.Verify, the oracle,
// for one (pub, msg, sig), and returns the oracle's answer. A fresh Key and
// a reused one (the cache's case) must both agree.
func same(t testing.TB, key *edcache.Key, pub, msg, sig []byte) bool {
	t.Helper()
	want := ed25519.Verify(pub, msg, sig)
	if got := key.VerifySlice(msg, sig); got != want {
		t.Errorf("pub %x msg %x sig %x: prepared %v, crypto/ed25519 %v", pub, msg, sig, got, want)
	}
	if got := edcache.New(pub).VerifySlice(msg, sig); got != want {
		t.Errorf("pub %x msg %x sig %x: fresh prepared %v, crypto/ed25519 %v", pub, msg, sig, got, want)
	}
	return want
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// corruptions returns sig and msg variants a verifier must reject: one bit
// flipped in R, in S, in the message, and S + L (non-canonical S, RFC 8032
// §5.1.7 "if S ≥ L reject").
func corruptions(r *rand.Rand, msg, sig []byte) (msgs, sigs [][]byte) {
	for _, half := range []int{0, 32} {
		s := append([]byte(nil), sig...)
		s[half+r.IntN(32)] ^= 1 << r.IntN(8)
		sigs = append(sigs, s)
	}
	sigs = append(sigs, addL(sig, 1), addL(sig, 2), sig[:63], append(append([]byte(nil), sig...), 0))
	m := append([]byte(nil), msg...)
	if len(m) == 0 {
		m = []byte{0}
	} else {
		m[r.IntN(len(m))] ^= 1 << r.IntN(8)
	}
	msgs = append(msgs, m)
	return msgs, sigs
}

// groupOrder is L = 2^252 + 27742317777372353535851937790883648493 (RFC 8032 §5.1).
var groupOrder, _ = new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)

// addL returns sig with S replaced by S + n·L (little-endian, truncated to
// 32 bytes): the same scalar, non-canonically encoded.
func addL(sig []byte, n int64) []byte {
	le := func(b []byte) []byte {
		out := make([]byte, len(b))
		for i := range b {
			out[len(b)-1-i] = b[i]
		}
		return out
	}
	s := new(big.Int).SetBytes(le(sig[32:]))
	s.Add(s, new(big.Int).Mul(groupOrder, big.NewInt(n)))
	be := s.FillBytes(make([]byte, 33))[1:]
	return append(append([]byte(nil), sig[:32]...), le(be)...)
}

// TestRFC8032 runs RFC 8032 §7.1 TEST 1–3 (and corruptions of each).
func TestRFC8032(t *testing.T) {
	r := rand.New(rand.NewPCG(8032, 1))
	for _, v := range []struct{ pub, msg, sig string }{
		{"d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
			"e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"},
		{"3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
			"92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
		{"fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
			"6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"},
	} {
		pub, msg, sig := unhex(t, v.pub), unhex(t, v.msg), unhex(t, v.sig)
		key := edcache.New(pub)
		if !same(t, key, pub, msg, sig) {
			t.Errorf("RFC 8032 vector %s rejected", v.pub)
		}
		msgs, sigs := corruptions(r, msg, sig)
		for _, s := range sigs {
			if same(t, key, pub, msg, s) {
				t.Errorf("corrupted signature %x accepted", s)
			}
		}
		for _, m := range msgs {
			if same(t, key, pub, m, sig) {
				t.Errorf("corrupted message %x accepted", m)
			}
		}
	}
}

// TestSignInput runs the 128 vectors of Go's crypto/ed25519
// testdata/sign.input.gz (a selection of SUPERCOP's sign.input, copied here unchanged), each valid
// and corrupted.
func TestSignInput(t *testing.T) {
	f, err := os.Open("testdata/sign.input.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1024, 2))
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		parts := strings.Split(sc.Text(), ":")
		if len(parts) != 5 {
			t.Fatalf("line %d: %d fields", n+1, len(parts))
		}
		pub, msg, sm := unhex(t, parts[1]), unhex(t, parts[2]), unhex(t, parts[3])
		sig := sm[:ed25519.SignatureSize]
		key := edcache.New(pub)
		if !same(t, key, pub, msg, sig) {
			t.Errorf("line %d: valid vector rejected", n+1)
		}
		msgs, sigs := corruptions(r, msg, sig)
		for _, s := range sigs {
			same(t, key, pub, msg, s)
		}
		for _, m := range msgs {
			same(t, key, pub, m, sig)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 128 {
		t.Fatalf("%d vectors, want 128", n)
	}
}

// TestWycheproof runs C2SP/wycheproof testvectors_v1/ed25519_test.json
// (@ dac1dd47, copied unchanged): each result must be the file's and
// crypto/ed25519's.
func TestWycheproof(t *testing.T) {
	data, err := os.ReadFile("testdata/ed25519_test.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		NumberOfTests int `json:"numberOfTests"`
		TestGroups    []struct {
			PublicKey struct {
				PK string `json:"pk"`
			} `json:"publicKey"`
			Tests []struct {
				TcID   int    `json:"tcId"`
				Msg    string `json:"msg"`
				Sig    string `json:"sig"`
				Result string `json:"result"`
			} `json:"tests"`
		} `json:"testGroups"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	n, valid := 0, 0
	for _, g := range file.TestGroups {
		pub := unhex(t, g.PublicKey.PK)
		key := edcache.New(pub)
		for _, tc := range g.Tests {
			n++
			got := same(t, key, pub, unhex(t, tc.Msg), unhex(t, tc.Sig))
			if want := tc.Result == "valid"; got != want {
				t.Errorf("tcId %d: %v, file says %s", tc.TcID, got, tc.Result)
			}
			if got {
				valid++
			}
		}
	}
	if n != file.NumberOfTests || n == 0 || valid == 0 || valid == n {
		t.Fatalf("ran %d of %d tests, %d valid", n, file.NumberOfTests, valid)
	}
}

// TestRandom: random keys and messages, valid and corrupted signatures.
func TestRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(25519, 3))
	for i := 0; i < 100; i++ {
		var seed [32]byte
		for j := range seed {
			seed[j] = byte(r.Uint32())
		}
		priv := ed25519.NewKeyFromSeed(seed[:])
		pub := priv.Public().(ed25519.PublicKey)
		msg := make([]byte, r.IntN(300))
		for j := range msg {
			msg[j] = byte(r.Uint32())
		}
		sig := ed25519.Sign(priv, msg)
		key := edcache.New(pub)
		if !same(t, key, pub, msg, sig) {
			t.Fatalf("valid signature rejected")
		}
		msgs, sigs := corruptions(r, msg, sig)
		for _, s := range sigs {
			if same(t, key, pub, msg, s) {
				t.Errorf("corrupted signature accepted")
			}
		}
		for _, m := range msgs {
			if same(t, key, pub, m, sig) {
				t.Errorf("corrupted message accepted")
			}
		}
		// Another key's valid signature.
		other := ed25519.NewKeyFromSeed(append(seed[1:], seed[0]))
		if same(t, key, pub, msg, ed25519.Sign(other, msg)) {
			t.Errorf("signature by another key accepted")
		}
	}
}

// torsion returns the encodings of the 8 points of the curve's small-order
// subgroup E[8] (orders 1, 2, 4, 8), computed as [L]P = [L−1]P + P for a
// point P of full order, then its multiples.
func torsion(t testing.TB) [][]byte {
	t.Helper()
	lMinus1 := new(big.Int).Sub(groupOrder, big.NewInt(1)).FillBytes(make([]byte, 32))
	for i, j := 0, 31; i < j; i, j = i+1, j-1 {
		lMinus1[i], lMinus1[j] = lMinus1[j], lMinus1[i]
	}
	s, err := edwards25519.NewScalar().SetCanonicalBytes(lMinus1)
	if err != nil {
		t.Fatal(err)
	}
	id := edwards25519.NewIdentityPoint()
	for b := byte(0); b < 255; b++ {
		enc := make([]byte, 32)
		enc[0] = b + 2
		p, err := new(edwards25519.Point).SetBytes(enc)
		if err != nil {
			continue
		}
		tp := new(edwards25519.Point).ScalarMult(s, p)
		tp.Add(tp, p)
		four := new(edwards25519.Point).Add(tp, tp)
		four.Add(four, four)
		if four.Equal(id) == 1 { // order < 8
			continue
		}
		var out [][]byte
		q := edwards25519.NewIdentityPoint()
		for k := 0; k < 8; k++ {
			out = append(out, q.Bytes())
			q.Add(q, tp)
		}
		if q.Equal(id) != 1 {
			t.Fatal("torsion point of order other than 8")
		}
		return out
	}
	t.Fatal("no point of order 8 found")
	return nil
}

// encodings returns public keys a verifier must decode exactly as
// crypto/ed25519 does: the small-order points, every non-canonical
// encoding (y ≥ p: y = p + 0 … p + 18, both signs of x), y = 0 … 18 with
// both signs, and random 32-byte strings (about half are not points).
func encodings(t testing.TB, r *rand.Rand) [][]byte {
	out := torsion(t)
	p := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	for y := int64(0); y < 19; y++ {
		for _, base := range []*big.Int{big.NewInt(0), p} {
			v := new(big.Int).Add(base, big.NewInt(y)).FillBytes(make([]byte, 32))
			for i, j := 0, 31; i < j; i, j = i+1, j-1 {
				v[i], v[j] = v[j], v[i]
			}
			neg := append([]byte(nil), v...)
			neg[31] |= 0x80
			out = append(out, v, neg)
		}
	}
	for i := 0; i < 24; i++ {
		v := make([]byte, 32)
		for j := range v {
			v[j] = byte(r.Uint32())
		}
		out = append(out, v)
	}
	return out
}

// TestSmallOrderAndNonCanonical: public keys and R values that are
// small-order, non-canonical or not points, with S = 0 and random S. With
// a small-order A and S = 0 the cofactorless equation holds for one R in
// eight, so crypto/ed25519 accepts some of these: the test checks that the
// prepared key accepts exactly the same ones.
func TestSmallOrderAndNonCanonical(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 4))
	small := torsion(t)
	accepted, decoded := 0, 0
	rs := append(small, encodings(t, r)[8:16]...)
	for _, pub := range encodings(t, r) {
		key := edcache.New(pub)
		if _, err := new(edwards25519.Point).SetBytes(pub); err == nil {
			decoded++
		}
		for m := 0; m < 3; m++ {
			msg := []byte{byte(m), byte(r.Uint32())}
			for _, rr := range rs {
				sig := make([]byte, 64)
				copy(sig, rr)
				if same(t, key, pub, msg, sig) {
					accepted++
				}
				if m == 0 {
					for j := 32; j < 63; j++ {
						sig[j] = byte(r.Uint32())
					}
					sig[63] = byte(r.Uint32()) & 0x0f
					same(t, key, pub, msg, sig)
				}
			}
		}
	}
	if accepted == 0 || decoded == 0 {
		t.Fatalf("%d accepted, %d keys decoded: the accepting and decoding paths were not exercised", accepted, decoded)
	}
	t.Logf("%d small-order signatures accepted by both", accepted)
}

// FuzzVerify: the prepared key answers as crypto/ed25519.Verify for any
// 32-byte key, message and signature.
func FuzzVerify(f *testing.F) {
	priv := ed25519.NewKeyFromSeed(make([]byte, 32))
	msg := []byte("flashgate")
	sig := ed25519.Sign(priv, msg)
	f.Add([]byte(priv.Public().(ed25519.PublicKey)), msg, sig)
	f.Add([]byte(priv.Public().(ed25519.PublicKey)), msg, addL(sig, 1))
	small := torsion(f)
	f.Add(small[3], msg, append(append([]byte(nil), small[5]...), make([]byte, 32)...))
	f.Add(make([]byte, 32), []byte{}, make([]byte, 64))
	f.Fuzz(func(t *testing.T, pub, msg, sig []byte) {
		if len(pub) != ed25519.PublicKeySize {
			return // crypto/ed25519.Verify panics; the verifier checks the length first
		}
		same(t, edcache.New(pub), pub, msg, sig)
	})
}
