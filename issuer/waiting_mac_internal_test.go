package issuer

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// macPool.mac is HMAC-SHA256(secret, the length-prefixed fields "fgw2",
// room, user, epoch, seq)[:16], whichever way it feeds the hash: the
// tokens minted before and after any rewrite of it must verify alike.
func TestWaitingMACKnownAnswer(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	p := newMACPool(secret)
	long := strings.Repeat("u", 128)
	for _, c := range []struct {
		room, user, epoch string
		seq               int64
	}{
		{"r", "u", "e1", 1},
		{"sale-2026", "user-42", "k3x9", 99},
		{"sale-2026", "user-42", "k3x9", 100},
		{strings.Repeat("r", 128), long, "abcdefgh", 1<<63 - 1},
	} {
		m := hmac.New(sha256.New, secret)
		for _, f := range []string{"fgw2", c.room, c.user, c.epoch, strconv.FormatInt(c.seq, 10)} {
			m.Write([]byte(strconv.Itoa(len(f)) + ":" + f))
		}
		want := m.Sum(nil)[:16]
		got := p.mac(c.room, c.user, c.epoch, c.seq)
		assert.Equal(t, want, got[:], "%+v", c)
		assert.Equal(t, waitingPrefix+p.sid+"_"+c.epoch+"_"+strconv.FormatInt(c.seq, 10)+"_"+
			base64.RawURLEncoding.EncodeToString(want), p.token(c.room, c.user, c.epoch, c.seq))
	}
}

// BenchmarkWaitingMAC: one waiting token's MAC (minted by every enter,
// checked by every status).
func BenchmarkWaitingMAC(b *testing.B) {
	p := newMACPool([]byte("0123456789abcdef0123456789abcdef"))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = p.mac("sale-2026", "user-4242", "k3x9", int64(100000+i))
	}
}

// A MAC costs no allocation: every enter mints one and every status checks
// one (the pooled state carries its message buffer).
func TestWaitingMACAllocates0(t *testing.T) {
	if raceEnabled {
		t.Skip("under -race sync.Pool drops pooled states at random: the count is the detector's")
	}
	p := newMACPool([]byte("0123456789abcdef0123456789abcdef"))
	p.mac("warm", "up", "e1", 1) // the pool's first state
	n := testing.AllocsPerRun(200, func() { _ = p.mac("sale-2026", "user-4242", "k3x9", 1234567) })
	assert.Zero(t, n)
}
