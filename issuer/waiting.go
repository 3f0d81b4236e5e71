package issuer

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
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

func waitingMAC(secret []byte, room, user string, seq int64) []byte {
	m := hmac.New(sha256.New, secret)
	var b []byte
	for _, f := range []string{"fgw1", room, user, strconv.FormatInt(seq, 10)} {
		b = strconv.AppendInt(b[:0], int64(len(f)), 10)
		b = append(b, ':')
		m.Write(b)
		m.Write([]byte(f))
	}
	return m.Sum(nil)[:16]
}

func makeWaitingToken(secret []byte, room, user string, seq int64) string {
	return waitingPrefix + strconv.FormatInt(seq, 10) + "_" +
		base64.RawURLEncoding.EncodeToString(waitingMAC(secret, room, user, seq))
}

// parseWaitingToken checks tok's form and MAC for (room, user) and returns
// its arrival seq. A well-formed token whose MAC fails is reported as
// ErrOwnerMismatch: it was minted for another user (or forged).
func parseWaitingToken(secret []byte, room, user, tok string) (int64, error) {
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
	mac, err := base64.RawURLEncoding.Strict().DecodeString(rest[i+1:])
	if err != nil || len(mac) != 16 {
		return 0, errorf(CodeBadWaiting, "not a waiting token")
	}
	if !hmac.Equal(mac, waitingMAC(secret, room, user, seq)) {
		return 0, errorf(CodeOwnerMismatch, "token owner mismatch: the waiting token was not issued to this user in room %q", room)
	}
	return seq, nil
}
