package verifier_test

import (
	"context"
	"crypto/ed25519"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/tokencases"
	"github.com/flashgate/flashgate/verifier"
)

// fakePrepared is a PreparedKeySet over StaticKeys whose keys verify with
// verify (crypto/ed25519 when nil) and count their calls. PublicKey counts
// too: Verify must not call it.
type fakePrepared struct {
	keys           *verifier.StaticKeys
	verify         func(pub ed25519.PublicKey, msg []byte, sig [64]byte) bool
	nilKey         bool // PreparedKey returns (nil, nil)
	publicKeyCalls atomic.Int64
	preparedCalls  atomic.Int64
	keyVerifyCalls atomic.Int64
}

type fakeKey struct {
	set *fakePrepared
	pub ed25519.PublicKey
}

func (k fakeKey) PublicKey() ed25519.PublicKey { return k.pub }

func (k fakeKey) Verify(msg []byte, sig [ed25519.SignatureSize]byte) bool {
	k.set.keyVerifyCalls.Add(1)
	if k.set.verify != nil {
		return k.set.verify(k.pub, msg, sig)
	}
	return ed25519.Verify(k.pub, msg, sig[:])
}

func (f *fakePrepared) PublicKey(ctx context.Context, kid string) (ed25519.PublicKey, error) {
	f.publicKeyCalls.Add(1)
	return f.keys.PublicKey(ctx, kid)
}

func (f *fakePrepared) PreparedKey(ctx context.Context, kid string) (verifier.PreparedKey, error) {
	f.preparedCalls.Add(1)
	pub, err := f.keys.PublicKey(ctx, kid)
	if err != nil || f.nilKey {
		return nil, err
	}
	return fakeKey{set: f, pub: pub}, nil
}

// TestPreparedKeySetTokenCases: over a PreparedKeySet, Verify gives every
// case of the shared table its expected code, asks PreparedKey instead of
// PublicKey, and checks signatures with the prepared key's Verify.
func TestPreparedKeySetTokenCases(t *testing.T) {
	set := buildSet(t)
	f := &fakePrepared{keys: set.Keys(t)}
	for _, c := range set.Cases {
		v, err := verifier.New(f, set.Config(c))
		require.NoError(t, err)
		plain := tokencases.Verifier(t, set, set.Config(c))
		tok, err := v.Verify(context.Background(), c.Token, c.Expect())
		require.Equalf(t, c.Want, verifier.CodeOf(err), "case %s: %v", c.Name, err)
		ptok, perr := plain.Verify(context.Background(), c.Token, c.Expect())
		require.Equal(t, ptok, tok, c.Name)
		if perr != nil {
			require.EqualError(t, err, perr.Error(), c.Name)
		}
	}
	require.Zero(t, f.publicKeyCalls.Load(), "PublicKey called though PreparedKey exists")
	require.Positive(t, f.preparedCalls.Load())
	require.Positive(t, f.keyVerifyCalls.Load())
}

// TestPreparedKeyDecides: the prepared key's answer is the signature step's
// answer — false refuses a valid token with ErrBadSignature, and still
// takes precedence over a claim error; Pending reports the prepared key's
// bytes; a nil prepared key is a 0-byte key (ErrBadSignature).
func TestPreparedKeyDecides(t *testing.T) {
	set := buildSet(t)
	c := set.Base(t)
	ctx := context.Background()
	f := &fakePrepared{keys: set.Keys(t), verify: func(ed25519.PublicKey, []byte, [64]byte) bool { return false }}
	v, err := verifier.New(f, set.Config(c))
	require.NoError(t, err)
	_, err = v.Verify(ctx, c.Token, c.Expect())
	require.ErrorIs(t, err, verifier.ErrBadSignature)

	late := set.Config(c)
	late.Now = func() time.Time { return time.Unix(c.Now+86400, 0) }
	v2, err := verifier.New(f, late)
	require.NoError(t, err)
	_, err = v2.Verify(ctx, c.Token, c.Expect())
	require.ErrorIs(t, err, verifier.ErrBadSignature, "signature before claims")
	f.verify = nil
	_, err = v2.Verify(ctx, c.Token, c.Expect())
	require.ErrorIs(t, err, verifier.ErrExpired)

	p, err := v.Prepare(ctx, c.Token, c.Expect())
	require.NoError(t, err)
	want, err := set.Keys(t).PublicKey(ctx, set.CurrentKID)
	require.NoError(t, err)
	require.Equal(t, want, p.PublicKey())
	sig := p.Signature()
	tok, err := p.Finish(ed25519.Verify(p.PublicKey(), []byte(p.SigningInput()), sig[:]))
	require.NoError(t, err)
	require.Equal(t, c.WantClaims.ID, tok.ID)

	vn, err := verifier.New(&fakePrepared{keys: set.Keys(t), nilKey: true}, set.Config(c))
	require.NoError(t, err)
	_, err = vn.Verify(ctx, c.Token, c.Expect())
	require.ErrorIs(t, err, verifier.ErrBadSignature)
}

// InsecureClaims gives steps 9–13's outcome without the signature's verdict
// (claims even of a forged token; a claim error where Verify would say
// ErrBadSignature), and Pending.Verify gives exactly Verify's answer.
func TestPendingInsecureClaimsAndVerify(t *testing.T) {
	set := buildSet(t)
	c := set.Base(t)
	ctx := context.Background()
	f := &fakePrepared{keys: set.Keys(t), verify: func(ed25519.PublicKey, []byte, [64]byte) bool { return false }}
	late := set.Config(c)
	late.Now = func() time.Time { return time.Unix(c.Now+86400, 0) }
	for _, tc := range []struct {
		name      string
		cfg       verifier.Config
		forged    bool
		claimsErr error
		verifyErr error
	}{
		{"valid", set.Config(c), false, nil, nil},
		{"forged", set.Config(c), true, nil, verifier.ErrBadSignature},
		{"expired", late, false, verifier.ErrExpired, verifier.ErrExpired},
		{"forged and expired", late, true, verifier.ErrExpired, verifier.ErrBadSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.forged {
				f.verify = func(ed25519.PublicKey, []byte, [64]byte) bool { return false }
			} else {
				f.verify = nil
			}
			v, err := verifier.New(f, tc.cfg)
			require.NoError(t, err)
			p, err := v.Prepare(ctx, c.Token, c.Expect())
			require.NoError(t, err)
			tok, err := p.InsecureClaims()
			if tc.claimsErr != nil {
				require.ErrorIs(t, err, tc.claimsErr)
			} else {
				require.NoError(t, err)
				require.Equal(t, c.WantClaims.ID, tok.ID)
			}
			tok, err = p.Verify()
			_, want := v.Verify(ctx, c.Token, c.Expect())
			if tc.verifyErr != nil {
				require.ErrorIs(t, err, tc.verifyErr)
				require.ErrorIs(t, want, tc.verifyErr)
			} else {
				require.NoError(t, err)
				require.NoError(t, want)
				require.Equal(t, c.WantClaims.ID, tok.ID)
			}
		})
	}
}
