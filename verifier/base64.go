package verifier

import "unsafe"

// Strict base64url (RFC 4648 §5) without padding, as JWS requires
// (RFC 7515 §2, Appendix C). It behaves like
// base64.RawURLEncoding.Strict().Decode, except that it reads a string
// (no []byte conversion, no allocation) and, unlike encoding/base64, does
// not skip '\r' and '\n': every byte must be in the alphabet.
//
// Rejected: any byte outside A–Z a–z 0–9 '-' '_' (so '=', '+', '/',
// whitespace), a length ≡ 1 (mod 4), and non-zero trailing bits in the
// last symbol (RFC 4648 §3.5 canonical encoding), so every byte string has
// exactly one accepted encoding.

const (
	b64Invalid = 0xFF
	b64Dot     = 0xFE
)

// b64Table maps a byte to its 6-bit value, b64Dot for '.', or b64Invalid.
var b64Table = func() (t [256]byte) {
	for i := range t {
		t[i] = b64Invalid
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for i := 0; i < len(alphabet); i++ {
		t[alphabet[i]] = byte(i)
	}
	t['.'] = b64Dot
	return t
}()

// decodedLen returns the decoded size of an n-character unpadded segment,
// or -1 when no such encoding exists (n ≡ 1 mod 4).
func decodedLen(n int) int {
	if n%4 == 1 {
		return -1
	}
	return n/4*3 + (n%4)*3/4
}

// decodeSegment strictly decodes s into dst and returns the number of bytes
// written. It reports false if s is not canonical unpadded base64url or dst
// is too small.
func decodeSegment(dst []byte, s string) (int, bool) {
	n := decodedLen(len(s))
	if n < 0 || n > len(dst) {
		return 0, false
	}
	t := &b64Table
	i, j := 0, 0
	for ; len(s)-i >= 4; i, j = i+4, j+3 {
		a, b, c, d := t[s[i]], t[s[i+1]], t[s[i+2]], t[s[i+3]]
		if (a|b|c|d)&0xC0 != 0 {
			return 0, false
		}
		v := uint32(a)<<18 | uint32(b)<<12 | uint32(c)<<6 | uint32(d)
		dst[j], dst[j+1], dst[j+2] = byte(v>>16), byte(v>>8), byte(v)
	}
	switch len(s) - i {
	case 2:
		a, b := t[s[i]], t[s[i+1]]
		if (a|b)&0xC0 != 0 || b&0x0F != 0 {
			return 0, false
		}
		dst[j] = a<<2 | b>>4
		j++
	case 3:
		a, b, c := t[s[i]], t[s[i+1]], t[s[i+2]]
		if (a|b|c)&0xC0 != 0 || c&0x03 != 0 {
			return 0, false
		}
		v := uint32(a)<<12 | uint32(b)<<6 | uint32(c)
		dst[j], dst[j+1] = byte(v>>10), byte(v>>2)
		j += 2
	}
	return j, true
}

// bytesOf returns a read-only view of s without copying. The result must
// never be written to; it is only handed to ed25519.Verify, which reads it.
func bytesOf(s string) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
