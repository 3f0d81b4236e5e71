package tokencases

import (
	"math/rand/v2"
	"strings"
)

const b64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// Mutate applies one to three random edits to a valid token: byte flips,
// base64url-alphabet substitutions, insertions and deletions (dots, '=',
// '+', spaces included), segment swaps and truncations. The differential
// tests (wasm, js/flashgate-verifier) send its output through the native
// verifier and the other implementation.
func Mutate(r *rand.Rand, tok string) string {
	b := []byte(tok)
	for range 1 + r.IntN(3) {
		if len(b) == 0 {
			break
		}
		i := r.IntN(len(b))
		switch r.IntN(7) {
		case 0:
			b[i] ^= byte(1 << r.IntN(8))
		case 1:
			b[i] = b64url[r.IntN(len(b64url))]
		case 2:
			extra := []byte{'.', '=', '+', '/', ' ', 'A', b64url[r.IntN(64)]}[r.IntN(7)]
			b = append(b[:i], append([]byte{extra}, b[i:]...)...)
		case 3:
			b = append(b[:i], b[i+1:]...)
		case 4:
			b = b[:i]
		case 5:
			p := strings.Split(string(b), ".")
			if len(p) == 3 {
				p[0], p[1] = p[1], p[0]
				b = []byte(strings.Join(p, "."))
			}
		case 6: // a change inside the last character of a segment (trailing bits)
			if j := strings.IndexByte(string(b), '.'); j > 0 {
				b[j-1] = b64url[r.IntN(64)]
			}
		}
	}
	return string(b)
}
