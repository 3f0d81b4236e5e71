package issuer

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// Waiting tokens are not JWTs: "fgw1_<seq>_<mac>", where seq is the entry's
// arrival number and mac = base64url(HMAC-SHA256(secret, "fgw1" ‖ room ‖ user ‖ seq)[:16]),
// each field length-prefixed. They are
//   - unguessable: forging one needs the 128-bit MAC;
//   - bound to (room, user): the MAC is checked against the caller's user id,
//     so another user's token fails with ErrOwnerMismatch (seed 000);
//   - never admission tokens: no dots, so the verifier refuses them as
//     malformed before any decoding, and they are keyed by a secret that is
//     not a signing key.
//
// Redis stores only seq, which keeps a waiting user at one ZSET member.
const waitingPrefix = "fgw1_"

// MaxWaitingTokenLen bounds a waiting token; longer input is refused unread.
const MaxWaitingTokenLen = 64

// strictB64 rejects non-zero trailing bits (Strict copies the encoding, so
// make it once).
var strictB64 = base64.RawURLEncoding.Strict()

// macPool holds keyed HMAC-SHA256 states for one secret: Reset restores the
// keyed state, so a status poll does not rebuild the key schedule.
type macPool struct {
	secret []byte
	pool   sync.Pool
}

func newMACPool(secret []byte) *macPool {
	p := &macPool{secret: secret}
	p.pool.New = func() any { return hmac.New(sha256.New, secret) }
	return p
}

// mac returns the first 16 bytes of HMAC-SHA256 over the length-prefixed
// fields "fgw1", room, user, seq.
func (p *macPool) mac(room, user string, seq int64) [16]byte {
	m := p.pool.Get().(hash.Hash)
	m.Reset()
	var b [64]byte
	for _, f := range [...]string{"fgw1", room, user, strconv.FormatInt(seq, 10)} {
		m.Write(append(strconv.AppendInt(b[:0], int64(len(f)), 10), ':'))
		m.Write(unsafe.Slice(unsafe.StringData(f), len(f)))
	}
	var out [16]byte
	copy(out[:], m.Sum(b[:0]))
	p.pool.Put(m)
	return out
}

func (p *macPool) token(room, user string, seq int64) string {
	mac := p.mac(room, user, seq)
	return waitingPrefix + strconv.FormatInt(seq, 10) + "_" + base64.RawURLEncoding.EncodeToString(mac[:])
}

// parse checks tok's form and MAC for (room, user) and returns its arrival
// seq. A well-formed token whose MAC fails is reported as ErrOwnerMismatch:
// it was minted for another user (or forged).
func (p *macPool) parse(room, user, tok string) (int64, error) {
	if len(tok) > MaxWaitingTokenLen || !strings.HasPrefix(tok, waitingPrefix) {
		return 0, errorf(CodeBadWaiting, "not a waiting token")
	}
	rest := tok[len(waitingPrefix):]
	i := strings.IndexByte(rest, '_')
	if i <= 0 || i > 19 {
		return 0, errorf(CodeBadWaiting, "not a waiting token")
	}
	seq, err := strconv.ParseInt(rest[:i], 10, 64)
	if err != nil || seq <= 0 || strconv.FormatInt(seq, 10) != rest[:i] {
		return 0, errorf(CodeBadWaiting, "not a waiting token")
	}
	var mac [16]byte
	if m := rest[i+1:]; len(m) != 22 {
		return 0, errorf(CodeBadWaiting, "not a waiting token")
	} else if n, err := strictB64.Decode(mac[:], unsafe.Slice(unsafe.StringData(m), len(m))); err != nil || n != 16 {
		return 0, errorf(CodeBadWaiting, "not a waiting token")
	}
	want := p.mac(room, user, seq)
	if !hmac.Equal(mac[:], want[:]) {
		return 0, errorf(CodeOwnerMismatch, "token owner mismatch: the waiting token was not issued to this user in room %q", room)
	}
	return seq, nil
}
