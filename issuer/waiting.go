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

	"github.com/flashgate/flashgate"
)

// Waiting tokens are not JWTs: "fgw2_<sid>_<epoch>_<seq>_<mac>", where
//   - sid names the secret that keyed the MAC: base64url(SHA-256(secret)[:3]),
//     4 characters, so a replica tells "minted under a secret I do not hold"
//     (a token from before a Redis data loss or a secret change: NOT_FOUND)
//     from "minted for someone else" (flashgate.ErrOwnerMismatch);
//   - epoch is the room's epoch when the entry was created (lua/prelude.lua):
//     after a data loss the room has a new one, and the token reads NOT_FOUND
//     instead of whatever entry now has its arrival number (invariant 6);
//   - seq is the entry's arrival number;
//   - mac = base64url(HMAC-SHA256(secret, "fgw2" ‖ room ‖ user ‖ epoch ‖ seq)[:16]),
//     each field length-prefixed.
//
// They are
//   - unguessable: forging one needs the 128-bit MAC;
//   - bound to (room, user): the MAC is checked against the caller's user id,
//     so another user's token fails with flashgate.ErrOwnerMismatch;
//   - never admission tokens: no dots, so the verifier refuses them as
//     malformed before any decoding, and they are keyed by a secret that is
//     not a signing key.
//
// Redis stores only seq, which keeps a waiting user at one ZSET member.
const waitingPrefix = "fgw2_"

// MaxWaitingTokenLen bounds a waiting token; longer input is refused unread.
const MaxWaitingTokenLen = 80

// strictB64 rejects non-zero trailing bits (Strict copies the encoding, so
// make it once).
var strictB64 = base64.RawURLEncoding.Strict()

// macPool holds keyed HMAC-SHA256 states for one secret: Reset restores the
// keyed state, so a status poll does not rebuild the key schedule.
type macPool struct {
	secret []byte
	sid    string // secretID(secret)
	pool   sync.Pool
}

func newMACPool(secret []byte) *macPool {
	p := &macPool{secret: secret, sid: secretID(secret)}
	p.pool.New = func() any { return &macState{h: hmac.New(sha256.New, secret)} }
	return p
}

// secretID is the 4-character public name of a waiting-token secret:
// base64url of the first 3 bytes of its SHA-256 (24 bits of a hash of a
// 256-bit secret reveal nothing usable).
func secretID(secret []byte) string {
	sum := sha256.Sum256(secret)
	return base64.RawURLEncoding.EncodeToString(sum[:3])
}

// mac returns the first 16 bytes of HMAC-SHA256 over the length-prefixed
// fields "fgw2", room, user, epoch, seq.
//
// The fields go to the hash in one Write, from the pooled state's buffer
// (valid ids, ValidID, fit it without growing it): a status or an enter
// computes one MAC each, without an allocation.
func (p *macPool) mac(room, user, epoch string, seq int64) [16]byte {
	st := p.pool.Get().(*macState)
	msg := st.buf[:0]
	field := func(f string) {
		msg = append(strconv.AppendInt(msg, int64(len(f)), 10), ':')
		msg = append(msg, f...)
	}
	field("fgw2")
	field(room)
	field(user)
	field(epoch)
	var digits [20]byte
	seqs := strconv.AppendInt(digits[:0], seq, 10)
	msg = append(strconv.AppendInt(msg, int64(len(seqs)), 10), ':')
	msg = append(msg, seqs...)
	st.h.Reset()
	st.h.Write(msg)
	var out [16]byte
	copy(out[:], st.h.Sum(st.buf[:0]))
	p.pool.Put(st)
	return out
}

// macState is one pooled keyed HMAC state and its message buffer.
type macState struct {
	h   hash.Hash
	buf [384]byte
}

func (p *macPool) token(room, user, epoch string, seq int64) string {
	mac := p.mac(room, user, epoch, seq)
	return waitingPrefix + p.sid + "_" + epoch + "_" + strconv.FormatInt(seq, 10) + "_" +
		base64.RawURLEncoding.EncodeToString(mac[:])
}

// waitingRef is what a verified waiting token names: an entry of a room's epoch.
type waitingRef struct {
	epoch string
	seq   int64
}

// secretSet is the waiting-token secrets a replica holds: the current one
// mints, and every one it has held (at most maxSecrets, newest first)
// verifies. Replaced whole (copy on write) when the shared secret changes.
type secretSet struct {
	current *macPool
	all     []*macPool
}

// maxSecrets bounds the secrets a replica keeps verifying with.
const maxSecrets = 4

func newSecretSet(secret []byte) *secretSet {
	p := newMACPool(secret)
	return &secretSet{current: p, all: []*macPool{p}}
}

// adopt returns the set with secret as the current one, keeping the others.
func (s *secretSet) adopt(secret []byte) *secretSet {
	p := newMACPool(secret)
	out := &secretSet{current: p, all: []*macPool{p}}
	for _, q := range s.all {
		if q.sid != p.sid && len(out.all) < maxSecrets {
			out.all = append(out.all, q)
		}
	}
	return out
}

func (s *secretSet) bySID(sid string) *macPool {
	for _, p := range s.all {
		if p.sid == sid {
			return p
		}
	}
	return nil
}

// errUnknownSecret marks a well-formed waiting token keyed by a secret this
// replica does not hold: minted before a data loss or a secret change. The
// entry it named is gone, so callers answer NOT_FOUND (never flashgate.ErrOwnerMismatch).
var errUnknownSecret = flashgate.Errorf(flashgate.CodeNotFound, "waiting token from before the queue store was reset: enter again")

// parse checks tok's form and MAC for (room, user) and returns the entry it
// names. A well-formed token whose MAC fails is reported as flashgate.ErrOwnerMismatch:
// it was minted for another user (or forged); one keyed by a secret this
// replica does not hold is errUnknownSecret, returned with the (unverified)
// entry it names.
func (s *secretSet) parse(room, user, tok string) (waitingRef, error) {
	bad := func() (waitingRef, error) {
		return waitingRef{}, flashgate.Errorf(flashgate.CodeBadWaiting, "not a waiting token")
	}
	if len(tok) > MaxWaitingTokenLen || !strings.HasPrefix(tok, waitingPrefix) {
		return bad()
	}
	// Positional: the sid and the MAC are base64url, whose alphabet has '_'.
	rest := tok[len(waitingPrefix):]
	if len(rest) < 5 || rest[4] != '_' {
		return bad()
	}
	sid, rest := rest[:4], rest[5:]
	epoch, rest, ok1 := strings.Cut(rest, "_")
	seqs, m, ok2 := strings.Cut(rest, "_")
	var sb [3]byte
	if !ok1 || !ok2 || !flashgate.ValidEpoch(epoch) {
		return bad()
	} else if n, err := strictB64.Decode(sb[:], unsafe.Slice(unsafe.StringData(sid), 4)); err != nil || n != 3 {
		return bad()
	}
	seq, err := strconv.ParseInt(seqs, 10, 64)
	if err != nil || seq <= 0 || len(seqs) > 19 || strconv.FormatInt(seq, 10) != seqs {
		return bad()
	}
	var mac [16]byte
	if len(m) != 22 {
		return bad()
	} else if n, err := strictB64.Decode(mac[:], unsafe.Slice(unsafe.StringData(m), len(m))); err != nil || n != 16 {
		return bad()
	}
	p := s.bySID(sid)
	if p == nil {
		return waitingRef{epoch: epoch, seq: seq}, errUnknownSecret // what it names, unverified
	}
	want := p.mac(room, user, epoch, seq)
	if !hmac.Equal(mac[:], want[:]) {
		return waitingRef{}, flashgate.Errorf(flashgate.CodeOwnerMismatch, "token owner mismatch: the waiting token was not issued to this user in room %q", room)
	}
	return waitingRef{epoch: epoch, seq: seq}, nil
}
