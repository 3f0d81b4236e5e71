package issuer_test

// Token-attack tests at the issuer (docs/token-attacks.md items 8, 18 and
// 20): replay protection keys on the admission id (jti), never on the
// token string; waiting and admission tokens cannot stand in for each
// other; completion refuses replays after completion and revocation.
// Helpers are prefixed atk so they cannot collide with other test files.

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"math/big"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/internal/testing/testkit"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/verifier"
)

const (
	atkIss = "https://issuer.attacks"
	atkAud = "orders"
)

// atkSigner signs like keys.Ring with a fixed kid and header member order.
type atkSigner struct {
	kid  string
	priv ed25519.PrivateKey
	// header, when set, replaces the usual header JSON (same members,
	// another order: another valid encoding of the same token).
	header string
}

func atkKey(label string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("flashgate issuer attacks: " + label))
	return ed25519.NewKeyFromSeed(seed[:])
}

func (s *atkSigner) Sign(payload []byte) (string, error) {
	ts := &testkit.Signer{Kid: s.kid, Key: s.priv}
	if s.header != "" {
		return ts.SignRaw([]byte(s.header), payload), nil
	}
	return ts.SignPayload(payload), nil
}

type atkEnv struct {
	ctx    context.Context
	room   string
	now    *atomic.Int64 // Unix milliseconds, shared by issuers and verifier
	is     *issuer.Issuer
	rdb    issuer.Redis
	v      *verifier.Verifier
	keyA   *atkSigner
	keyB   *atkSigner
	secret []byte
}

// atkSetup starts a private redis-server (the clock is injected), a room of
// capacity 10 and a verifier that trusts two keys, as during a rotation.
func atkSetup(t *testing.T) *atkEnv {
	t.Helper()
	e := &atkEnv{ctx: context.Background(), room: redistest.Room("atk"), now: new(atomic.Int64),
		keyA: &atkSigner{kid: "kA", priv: atkKey("a")}, keyB: &atkSigner{kid: "kB", priv: atkKey("b")},
		secret: []byte("attacks-waiting-secret-0123456789abcdef")}
	e.now.Store(time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC).UnixMilli())
	e.rdb = redistest.Start(t).Client(t)
	e.is = e.issuer(t, e.keyA)
	_, err := e.is.SetRoom(e.ctx, e.room, issuer.RoomConfig{Capacity: 10, SessionDuration: time.Minute})
	require.NoError(t, err)
	keys := verifier.NewStaticKeys(map[string]ed25519.PublicKey{
		"kA": e.keyA.priv.Public().(ed25519.PublicKey), "kB": e.keyB.priv.Public().(ed25519.PublicKey)})
	e.v, err = verifier.New(keys, verifier.Config{Issuer: atkIss, Audience: atkAud, Now: e.clock})
	require.NoError(t, err)
	return e
}

func (e *atkEnv) clock() time.Time { return time.UnixMilli(e.now.Load()) }

// issuer returns another issuer replica on the same Redis signing with s.
func (e *atkEnv) issuer(t *testing.T, s issuer.Signer) *issuer.Issuer {
	t.Helper()
	is, err := issuer.New(issuer.Config{Redis: e.rdb, WaitingSecret: e.secret, Signer: s,
		Issuer: atkIss, Audience: atkAud, Now: e.clock})
	require.NoError(t, err)
	return is
}

func (e *atkEnv) admitted(t *testing.T, user string) *issuer.Entry {
	t.Helper()
	en, err := e.is.Enter(e.ctx, e.room, user)
	require.NoError(t, err)
	require.Equal(t, flashgate.StateActive, en.State)
	return en
}

func (e *atkEnv) verify(t *testing.T, tok, user string) *verifier.Token {
	t.Helper()
	vt, err := e.v.Verify(e.ctx, tok, verifier.Expect{Product: e.room, User: user})
	require.NoError(t, err)
	return vt
}

// atkVariants mints three different token strings for one admission: the
// issuer's own, a re-mint by a replica signing with the other (rotated)
// key, and the same claims under a header with its members in another
// order. All three verify, with the same jti.
func atkVariants(t *testing.T, e *atkEnv, user, waiting string) []string {
	t.Helper()
	var out []string
	for _, s := range []*atkSigner{
		e.keyA,
		e.keyB,
		{kid: "kA", priv: e.keyA.priv, header: `{"typ":"` + verifier.TokenType + `","kid":"kA","alg":"EdDSA"}`},
	} {
		a, err := e.issuer(t, s).Exchange(e.ctx, e.room, user, waiting)
		require.NoError(t, err)
		out = append(out, a.Token)
	}
	require.Len(t, map[string]bool{out[0]: true, out[1]: true, out[2]: true}, 3, "three distinct token strings")
	return out
}

// TestAttackReplayKeyedOnJTI (items 8 and 20): an admission completes once,
// whatever token string carries it. Three different valid strings for the
// same admission verify offline with the same jti; the first completion
// consumes the admission, the other two are reported as repeats of it
// (same CompletedAt, Stats.Completed stays 1) and CheckActive refuses all
// three — a replay never buys twice. A malleated signature (S + L) never
// reaches completion: the verifier refuses it.
func TestAttackReplayKeyedOnJTI(t *testing.T) {
	e := atkSetup(t)
	en := e.admitted(t, "alice")
	toks := atkVariants(t, e, "alice", en.WaitingToken)
	var verified []*verifier.Token
	for _, tok := range toks {
		vt := e.verify(t, tok, "alice")
		assert.Equal(t, en.AdmissionID, vt.ID, "every variant carries the admission id as jti")
		verified = append(verified, vt)
	}
	require.NoError(t, e.is.CheckActive(e.ctx, verified[1].Product, verified[1].ID))

	first, err := e.is.Complete(e.ctx, verified[0].Product, verified[0].User, verified[0].ID)
	require.NoError(t, err)
	require.False(t, first.Repeated)
	e.now.Add(1500)
	for i, vt := range verified {
		c, err := e.is.Complete(e.ctx, vt.Product, vt.User, vt.ID)
		require.NoErrorf(t, err, "variant %d", i)
		assert.Truef(t, c.Repeated, "variant %d completes the already completed admission again", i)
		assert.Truef(t, first.CompletedAt.Equal(c.CompletedAt), "variant %d: the first completion's time", i)
		assert.ErrorIsf(t, e.is.CheckActive(e.ctx, vt.Product, vt.ID), flashgate.ErrNotFound, "variant %d no longer active", i)
	}
	st, err := e.is.Stats(e.ctx, e.room)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Completed, "one admission, one completion")
	_, err = e.is.Exchange(e.ctx, e.room, "alice", en.WaitingToken)
	assert.ErrorIs(t, err, flashgate.ErrCompleted, "no fresh token for a completed admission")

	// Ed25519 signatures are not malleable: R || (S + L) is refused, so the
	// only way to a second token string is a re-mint, which keeps the jti.
	dot := strings.LastIndexByte(toks[0], '.')
	sig, err := base64.RawURLEncoding.DecodeString(toks[0][dot+1:])
	require.NoError(t, err)
	_, err = e.v.Verify(e.ctx, toks[0][:dot+1]+base64.RawURLEncoding.EncodeToString(atkMalleate(sig)),
		verifier.Expect{Product: e.room, User: "alice"})
	assert.ErrorIs(t, err, verifier.ErrBadSignature)
}

// TestAttackReplayAfterRevocation (item 20): a revoked admission's tokens —
// every variant — still verify offline (revocation is not visible without
// Redis), but CheckActive and completion refuse them, now and on retry.
func TestAttackReplayAfterRevocation(t *testing.T) {
	e := atkSetup(t)
	en := e.admitted(t, "bob")
	toks := atkVariants(t, e, "bob", en.WaitingToken)
	_, err := e.is.Revoke(e.ctx, e.room, "", en.AdmissionID)
	require.NoError(t, err)
	for i, tok := range toks {
		vt := e.verify(t, tok, "bob")
		assert.ErrorIsf(t, e.is.CheckActive(e.ctx, vt.Product, vt.ID), flashgate.ErrNotFound, "variant %d", i)
		for try := 0; try < 2; try++ {
			_, err := e.is.Complete(e.ctx, vt.Product, vt.User, vt.ID)
			assert.ErrorIsf(t, err, flashgate.ErrRevoked, "variant %d, try %d", i, try)
		}
	}
	st, err := e.is.Stats(e.ctx, e.room)
	require.NoError(t, err)
	assert.EqualValues(t, 0, st.Completed)

	// Expired then replayed: refused at completion as well.
	en2 := e.admitted(t, "carol")
	a, err := e.is.Exchange(e.ctx, e.room, "carol", en2.WaitingToken)
	require.NoError(t, err)
	vt := e.verify(t, a.Token, "carol")
	e.now.Add(time.Minute.Milliseconds())
	_, err = e.is.Complete(e.ctx, vt.Product, vt.User, vt.ID)
	assert.ErrorIs(t, err, flashgate.ErrExpired)
}

// TestAttackReplayOtherUserOrProduct (item 17 at completion): the verified
// claims of alice's admission, presented for another user or another room,
// are refused by completion too (the verifier already refuses them when the
// caller passes Expect.User / Expect.Product).
func TestAttackReplayOtherUserOrProduct(t *testing.T) {
	e := atkSetup(t)
	en := e.admitted(t, "alice")
	a, err := e.is.Exchange(e.ctx, e.room, "alice", en.WaitingToken)
	require.NoError(t, err)
	_, err = e.v.Verify(e.ctx, a.Token, verifier.Expect{Product: e.room, User: "mallory"})
	assert.ErrorIs(t, err, verifier.ErrBadUser)
	_, err = e.v.Verify(e.ctx, a.Token, verifier.Expect{Product: e.room + "-other"})
	assert.ErrorIs(t, err, verifier.ErrBadProduct)

	vt := e.verify(t, a.Token, "alice")
	other := *vt
	other.User = "mallory"
	_, err = e.is.Complete(e.ctx, other.Product, other.User, other.ID)
	assert.ErrorIs(t, err, flashgate.ErrOwnerMismatch)
	otherRoom := *vt
	otherRoom.Product = redistest.Room("atk-other")
	_, err = e.is.Complete(e.ctx, otherRoom.Product, otherRoom.User, otherRoom.ID)
	assert.Error(t, err)
	c, err := e.is.Complete(e.ctx, vt.Product, vt.User, vt.ID)
	require.NoError(t, err, "the rightful owner still completes")
	assert.False(t, c.Repeated)
}

// TestAttackWaitingTokenAsAdmission (item 18): a real waiting token is
// refused by the verifier before any decoding (malformed: no dots), is no
// admission id, and an admission token is no waiting token.
func TestAttackWaitingTokenAsAdmission(t *testing.T) {
	e := atkSetup(t)
	en := e.admitted(t, "dave")
	w := en.WaitingToken
	require.True(t, strings.HasPrefix(w, "fgw2_"), w)

	_, err := e.v.Verify(e.ctx, w, verifier.Expect{Product: e.room, User: "dave"})
	assert.ErrorIs(t, err, verifier.ErrMalformed)
	_, err = e.v.Verify(e.ctx, "Bearer "+w, verifier.Expect{Product: e.room})
	assert.ErrorIs(t, err, verifier.ErrMalformed)

	_, err = e.is.Complete(e.ctx, e.room, "dave", w)
	assert.ErrorIs(t, err, flashgate.ErrNotFound, "a waiting token is not an admission id")
	assert.ErrorIs(t, e.is.CheckActive(e.ctx, e.room, w), flashgate.ErrNotFound)

	a, err := e.is.Exchange(e.ctx, e.room, "dave", w)
	require.NoError(t, err)
	_, err = e.is.Status(e.ctx, e.room, "dave", a.Token)
	assert.ErrorIs(t, err, flashgate.ErrBadWaiting, "an admission token is not a waiting token")
	_, err = e.is.Exchange(e.ctx, e.room, "dave", a.Token)
	assert.ErrorIs(t, err, flashgate.ErrBadWaiting)
}

// atkL is the order of the Ed25519 base point (RFC 8032 §5.1).
var atkL, _ = new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)

// atkMalleate returns R || (S + L), little-endian S.
func atkMalleate(sig []byte) []byte {
	s := make([]byte, 32)
	for i := range s {
		s[i] = sig[63-i]
	}
	be := new(big.Int).Add(new(big.Int).SetBytes(s), atkL).FillBytes(make([]byte, 32))
	out := append([]byte(nil), sig[:32]...)
	for i := 31; i >= 0; i-- {
		out = append(out, be[i])
	}
	return out
}
