package verifier

import (
	"errors"
	"unicode/utf8"
)

// This file is a small, strict, allocation-free JSON scanner (RFC 8259) used
// for the JOSE header, the claims set and JWK Set documents. It replaces
// encoding/json on the hot path: it is reflection-free (TinyGo-friendly),
// scans each document once, records the top-level members as offsets into
// the caller's buffer and rejects what a lenient decoder would let through:
//
//   - duplicate member names, compared after unescaping, in every object
//     (RFC 7515 §5.2 step 4, RFC 7519 §4, RFC 8725 §3.1 / I-JSON RFC 7493 §2.3);
//   - invalid UTF-8 and unpaired surrogate escapes (RFC 7493 §2.1);
//   - anything RFC 8259 does not allow: comments, trailing commas, single
//     quotes, leading zeros, control characters in strings, trailing garbage.
//
// Limits (RFC 8259 §9 lets a parser set them): at most maxMembers members per
// object, at most maxDepth levels of nesting, documents shorter than 2 GiB.

// Kinds of JSON values.
const (
	kindString byte = iota + 1
	kindNumber
	kindObject
	kindArray
	kindTrue
	kindFalse
	kindNull
)

const (
	// maxMembers bounds the members of one object. An admission token has 3
	// header and 7–8 claim members; the bound keeps duplicate detection
	// (quadratic in the member count) cheap for hostile input.
	maxMembers = 64
	// maxDepth bounds nesting of objects and arrays.
	maxDepth = 16
)

// Scanner errors; callers map them to ErrMalformed / ErrDuplicateKey.
var (
	errJSONSyntax    = errors.New("invalid JSON")
	errJSONNotObject = errors.New("JSON text is not an object")
	errJSONTrailing  = errors.New("data after the JSON object")
	errJSONDepth     = errors.New("JSON nested too deeply")
	errJSONMembers   = errors.New("too many JSON object members")
	errJSONDuplicate = errors.New("duplicate JSON member name")
)

// span is a half-open byte range [start, end) in the scanned buffer.
type span struct{ start, end int32 }

// member is one top-level object member. For string values, val is the
// content between the quotes (escapes still in place) and valEsc tells
// whether it contains a backslash; for other kinds val is the raw value.
type member struct {
	name, val       span
	kind            byte
	nameEsc, valEsc bool
}

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipWS(b []byte, i int) int {
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

// parseTopObject parses b, which must hold exactly one JSON object
// (surrounding whitespace allowed), appending its members to out.
func parseTopObject(b []byte, out []member) ([]member, error) {
	if len(b) > 1<<30 {
		return out, errJSONSyntax
	}
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return out, errJSONNotObject
	}
	out, end, err := parseObject(b, i, 0, out)
	if err != nil {
		return out, err
	}
	if skipWS(b, end) != len(b) {
		return out, errJSONTrailing
	}
	return out, nil
}

// parseObject parses the object starting at b[i] == '{' and returns the index
// just past it. Members are appended to out; duplicates among the members of
// this object are an error.
func parseObject(b []byte, i, depth int, out []member) ([]member, int, error) {
	if depth >= maxDepth {
		return out, i, errJSONDepth
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return out, i + 1, nil
	}
	base := len(out)
	for {
		if i >= len(b) || b[i] != '"' {
			return out, i, errJSONSyntax
		}
		ne, nesc, ok := scanString(b, i)
		if !ok {
			return out, i, errJSONSyntax
		}
		m := member{name: span{int32(i + 1), int32(ne - 1)}, nameEsc: nesc}
		i = skipWS(b, ne)
		if i >= len(b) || b[i] != ':' {
			return out, i, errJSONSyntax
		}
		i = skipWS(b, i+1)
		kind, ve, vesc, err := scanValue(b, i, depth)
		if err != nil {
			return out, i, err
		}
		m.kind = kind
		if kind == kindString {
			m.val = span{int32(i + 1), int32(ve - 1)}
			m.valEsc = vesc
		} else {
			m.val = span{int32(i), int32(ve)}
		}
		for k := base; k < len(out); k++ {
			if sameName(b, &out[k], &m) {
				return out, i, errJSONDuplicate
			}
		}
		if len(out)-base >= maxMembers {
			return out, i, errJSONMembers
		}
		out = append(out, m)
		i = skipWS(b, ve)
		if i >= len(b) {
			return out, i, errJSONSyntax
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return out, i + 1, nil
		default:
			return out, i, errJSONSyntax
		}
	}
}

// parseArray skips the array starting at b[i] == '['. If elems is non-nil,
// it is called with the kind and start/end offsets of every element (for
// strings: the content between the quotes and whether it has escapes).
func parseArray(b []byte, i, depth int, elems func(kind byte, s span, esc bool) error) (int, error) {
	if depth >= maxDepth {
		return i, errJSONDepth
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		kind, ve, esc, err := scanValue(b, i, depth)
		if err != nil {
			return i, err
		}
		if elems != nil {
			s := span{int32(i), int32(ve)}
			if kind == kindString {
				s = span{int32(i + 1), int32(ve - 1)}
			}
			if err := elems(kind, s, esc); err != nil {
				return i, err
			}
		}
		i = skipWS(b, ve)
		if i >= len(b) {
			return i, errJSONSyntax
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case ']':
			return i + 1, nil
		default:
			return i, errJSONSyntax
		}
	}
}

// scanValue scans the value starting at b[i] (no leading whitespace) and
// returns its kind, the index just past it and, for strings, whether the
// string contains escapes. depth is the nesting depth of the enclosing
// container.
func scanValue(b []byte, i, depth int) (kind byte, end int, esc bool, err error) {
	if i >= len(b) {
		return 0, i, false, errJSONSyntax
	}
	switch c := b[i]; {
	case c == '"':
		end, esc, ok := scanString(b, i)
		if !ok {
			return 0, i, false, errJSONSyntax
		}
		return kindString, end, esc, nil
	case c == '-' || (c >= '0' && c <= '9'):
		end, ok := scanNumber(b, i)
		if !ok {
			return 0, i, false, errJSONSyntax
		}
		return kindNumber, end, false, nil
	case c == '{':
		var local [8]member
		_, end, err := parseObject(b, i, depth+1, local[:0])
		return kindObject, end, false, err
	case c == '[':
		end, err := parseArray(b, i, depth+1, nil)
		return kindArray, end, false, err
	case c == 't':
		return literal(b, i, "true", kindTrue)
	case c == 'f':
		return literal(b, i, "false", kindFalse)
	case c == 'n':
		return literal(b, i, "null", kindNull)
	}
	return 0, i, false, errJSONSyntax
}

func literal(b []byte, i int, lit string, kind byte) (byte, int, bool, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, i, false, errJSONSyntax
	}
	return kind, i + len(lit), false, nil
}

// scanNumber scans an RFC 8259 number starting at b[i].
func scanNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		i++
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		s := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == s {
			return i, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		s := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == s {
			return i, false
		}
	}
	return i, true
}

// scanString scans the string starting at b[i] == '"' and returns the index
// just past the closing quote and whether the string contains escapes.
func scanString(b []byte, i int) (end int, esc bool, ok bool) {
	i++
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, esc, true
		case c == '\\':
			esc = true
			i++
			if i >= len(b) {
				return i, esc, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				r, ok := hex4(b, i+1)
				if !ok {
					return i, esc, false
				}
				i += 5
				switch {
				case r >= 0xD800 && r < 0xDC00: // high surrogate: a low one must follow
					if len(b)-i < 6 || b[i] != '\\' || b[i+1] != 'u' {
						return i, esc, false
					}
					r2, ok := hex4(b, i+2)
					if !ok || r2 < 0xDC00 || r2 > 0xDFFF {
						return i, esc, false
					}
					i += 6
				case r >= 0xDC00 && r <= 0xDFFF: // unpaired low surrogate
					return i, esc, false
				}
			default:
				return i, esc, false
			}
		case c < 0x20:
			return i, esc, false
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				return i, esc, false
			}
			i += size
		}
	}
	return i, esc, false
}

func hex4(b []byte, i int) (rune, bool) {
	if len(b)-i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// appendUnescaped appends the decoded form of raw, the content of a string
// already validated by scanString.
func appendUnescaped(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		switch raw[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _ := hex4(raw, i+2)
			i += 6
			if r >= 0xD800 && r < 0xDC00 {
				r2, _ := hex4(raw, i+2)
				r = (r-0xD800)<<10 | (r2 - 0xDC00) + 0x10000
				i += 6
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, raw[i+1])
		}
		i += 2
	}
	return dst
}

func (s span) of(b []byte) []byte { return b[s.start:s.end] }

// sameName reports whether two members have the same name after unescaping.
func sameName(b []byte, x, y *member) bool {
	xn, yn := x.name.of(b), y.name.of(b)
	if !x.nameEsc && !y.nameEsc {
		return string(xn) == string(yn)
	}
	var xs, ys [64]byte
	return string(appendUnescaped(xs[:0], xn)) == string(appendUnescaped(ys[:0], yn))
}

// nameOf returns the member's name, unescaped into scratch when needed.
func nameOf(b []byte, m *member, scratch *[32]byte) []byte {
	n := m.name.of(b)
	if !m.nameEsc {
		return n
	}
	return appendUnescaped(scratch[:0], n)
}

// stringIs reports whether m is a string whose unescaped value is want.
func stringIs(b []byte, m *member, want string) bool {
	if m == nil || m.kind != kindString {
		return false
	}
	v := m.val.of(b)
	if !m.valEsc {
		return string(v) == want
	}
	if len(v) < len(want) { // unescaping only shortens
		return false
	}
	var scratch [128]byte
	return string(appendUnescaped(scratch[:0], v)) == want
}

// stringValue returns the unescaped value of a string member (allocates).
func stringValue(b []byte, m *member) string {
	v := m.val.of(b)
	if !m.valEsc {
		return string(v)
	}
	return string(appendUnescaped(make([]byte, 0, len(v)), v))
}

// stringLen returns the byte length of a string member's unescaped value.
func stringLen(b []byte, m *member) int {
	v := m.val.of(b)
	if !m.valEsc {
		return len(v)
	}
	var scratch [128]byte
	return len(appendUnescaped(scratch[:0], v))
}

// maxInt is the largest accepted integer claim value: 2^53 − 1, the I-JSON
// (RFC 7493 §2.2) interoperable range.
const maxInt = 1<<53 - 1

// intValue returns the value of a number member written as -?[0-9]+ (no
// fraction, no exponent) with 0 < value ≤ 2^53 − 1.
func intValue(b []byte, m *member) (int64, bool) {
	if m == nil || m.kind != kindNumber {
		return 0, false
	}
	v := m.val.of(b)
	if len(v) == 0 || len(v) > 16 || v[0] == '-' {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if n <= 0 || n > maxInt {
		return 0, false
	}
	return n, true
}
