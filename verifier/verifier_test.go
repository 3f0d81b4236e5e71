package verifier_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/testkit"
	"github.com/flashgate/flashgate/internal/testing/tokencases"
	"github.com/flashgate/flashgate/verifier"
)

// buildSet is the shared case table as committed
// (internal/testing/tokencases/testdata/cases.json): the bytes the wasm and worker
// harnesses run too.
func buildSet(t testing.TB) *tokencases.Set {
	t.Helper()
	return tokencases.MustLoad(t, tokencases.GoldenPath(1))
}

func TestTokenCases(t *testing.T) {
	set := buildSet(t)
	keys := set.Keys(t)
	require.Equal(t, []string{set.CurrentKID, set.PreviousKID}, sortedPair(set.CurrentKID, set.PreviousKID, keys.KeyIDs()))

	covered := map[verifier.Code]bool{}
	for _, c := range set.Cases {
		t.Run(c.Name, func(t *testing.T) {
			v, err := verifier.New(keys, set.Config(c))
			require.NoError(t, err)
			tok, err := v.Verify(context.Background(), c.Token, c.Expect())
			got := verifier.CodeOf(err)
			require.Equalf(t, c.Want, got, "case %s (%s): err = %v", c.Name, c.Source, err)
			covered[got] = true
			if c.Want != verifier.CodeOK {
				require.Nil(t, tok)
				var ve *verifier.Error
				require.True(t, errors.As(err, &ve), "error %v does not wrap a *verifier.Error", err)
				return
			}
			require.NotNil(t, c.WantClaims, "valid case without WantClaims")
			w := c.WantClaims
			assert.Equal(t, w.KeyID, tok.KeyID)
			assert.Equal(t, w.Issuer, tok.Issuer)
			assert.Equal(t, w.Audience, tok.Audience)
			assert.Equal(t, w.User, tok.User)
			assert.Equal(t, w.Product, tok.Product)
			assert.Equal(t, w.ID, tok.ID)
			assert.Equal(t, w.IssuedAt, tok.IssuedAt.Unix())
			assert.Equal(t, w.ExpiresAt, tok.ExpiresAt.Unix())
		})
	}
	// Every rule is exercised by at least one case (ErrUnavailable needs a
	// failing KeySet and is covered by TestKeySetErrors).
	for c := verifier.CodeOK; c <= verifier.CodeUnavailable; c++ {
		if c == verifier.CodeUnavailable {
			continue
		}
		assert.Truef(t, covered[c], "no token case yields %v", c)
	}
}

func sortedPair(a, b string, got []string) []string {
	if len(got) == 2 && got[0] == b {
		return []string{got[1], got[0]}
	}
	return got
}

// TestSentinels checks errors.Is on each wrapped failure.
func TestSentinels(t *testing.T) {
	set := buildSet(t)
	keys := set.Keys(t)
	sentinels := map[verifier.Code]error{
		verifier.CodeTooLarge: verifier.ErrTooLarge, verifier.CodeMalformed: verifier.ErrMalformed,
		verifier.CodeDuplicateKey: verifier.ErrDuplicateKey, verifier.CodeUnsupportedAlg: verifier.ErrUnsupportedAlg,
		verifier.CodeForbiddenHeader: verifier.ErrForbiddenHeader, verifier.CodeBadType: verifier.ErrBadType,
		verifier.CodeUnknownKey: verifier.ErrUnknownKey, verifier.CodeBadSignature: verifier.ErrBadSignature,
		verifier.CodeBadIssuer: verifier.ErrBadIssuer, verifier.CodeBadAudience: verifier.ErrBadAudience,
		verifier.CodeBadProduct: verifier.ErrBadProduct, verifier.CodeBadUser: verifier.ErrBadUser,
		verifier.CodeInvalidClaims: verifier.ErrInvalidClaims, verifier.CodeExpired: verifier.ErrExpired,
		verifier.CodeNotYetValid: verifier.ErrNotYetValid, verifier.CodeLifetimeTooLong: verifier.ErrLifetimeTooLong,
	}
	for _, c := range set.Cases {
		if c.Want == verifier.CodeOK {
			continue
		}
		v, err := verifier.New(keys, set.Config(c))
		require.NoError(t, err)
		_, err = v.Verify(context.Background(), c.Token, c.Expect())
		require.Truef(t, errors.Is(err, sentinels[c.Want]), "%s: %v is not %v", c.Name, err, sentinels[c.Want])
		require.True(t, strings.HasPrefix(err.Error(), "verifier: "), err.Error())
	}
}

func TestNew(t *testing.T) {
	keys := verifier.NewStaticKeys(nil)
	ok := verifier.Config{Issuer: "i", Audience: "a"}
	_, err := verifier.New(keys, ok)
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		keys verifier.KeySet
		cfg  verifier.Config
	}{
		"nil keys":         {nil, ok},
		"no issuer":        {keys, verifier.Config{Audience: "a"}},
		"no audience":      {keys, verifier.Config{Issuer: "i"}},
		"negative leeway":  {keys, verifier.Config{Issuer: "i", Audience: "a", Leeway: -time.Second}},
		"leeway too large": {keys, verifier.Config{Issuer: "i", Audience: "a", Leeway: verifier.MaxLeeway + 1}},
		"negative life":    {keys, verifier.Config{Issuer: "i", Audience: "a", MaxLifetime: -1}},
	} {
		_, err := verifier.New(tc.keys, tc.cfg)
		require.Error(t, err, name)
	}
	_, err = verifier.New(keys, verifier.Config{Issuer: "i", Audience: "a", Leeway: verifier.MaxLeeway})
	require.NoError(t, err)
}

// TestDefaults: nil Now is the wall clock; zero MaxLifetime is the default.
func TestDefaults(t *testing.T) {
	priv := tokencases.Key("defaults")
	kid := "k"
	keys := verifier.NewStaticKeys(map[string]ed25519.PublicKey{kid: priv.Public().(ed25519.PublicKey)})
	v, err := verifier.New(keys, verifier.Config{Issuer: tokencases.Issuer, Audience: tokencases.Audience, Product: tokencases.Product})
	require.NoError(t, err)
	now := time.Now().Unix()
	tok := signClaims(priv, kid, now-10, now+290)
	got, err := v.Verify(context.Background(), tok, verifier.Expect{})
	require.NoError(t, err)
	require.Equal(t, tokencases.Product, got.Product) // from Config.Product
	require.Equal(t, tokencases.User, got.User)

	long := signClaims(priv, kid, now-10, now-10+int64(verifier.DefaultMaxLifetime/time.Second)+1)
	_, err = v.Verify(context.Background(), long, verifier.Expect{})
	require.ErrorIs(t, err, verifier.ErrLifetimeTooLong)

	// A custom MaxLifetime and a sub-second leeway (rounded down to 0 s).
	v2, err := verifier.New(keys, verifier.Config{Issuer: tokencases.Issuer, Audience: tokencases.Audience,
		MaxLifetime: time.Minute, Leeway: 900 * time.Millisecond,
		Now: func() time.Time { return time.Unix(now+290, 999e6) }})
	require.NoError(t, err)
	_, err = v2.Verify(context.Background(), tok, verifier.Expect{Product: tokencases.Product})
	require.ErrorIs(t, err, verifier.ErrLifetimeTooLong)
	ok := signClaims(priv, kid, now, now+60)
	v3, err := verifier.New(keys, verifier.Config{Issuer: tokencases.Issuer, Audience: tokencases.Audience,
		MaxLifetime: time.Minute, Leeway: 900 * time.Millisecond,
		Now: func() time.Time { return time.Unix(now+60, 999e6) }})
	require.NoError(t, err)
	_, err = v3.Verify(context.Background(), ok, verifier.Expect{Product: tokencases.Product})
	require.ErrorIs(t, err, verifier.ErrExpired)
}

func signClaims(priv ed25519.PrivateKey, kid string, iat, exp int64) string {
	return (&testkit.Signer{Kid: kid, Key: priv}).Sign(flashgate.NewClaims(tokencases.Issuer, tokencases.Audience,
		tokencases.User, tokencases.Product, "j1", time.Unix(iat, 0), time.Unix(exp, 0)))
}

type failingKeys struct{ err error }

func (f failingKeys) PublicKey(context.Context, string) (ed25519.PublicKey, error) { return nil, f.err }

type badSizeKeys struct{}

func (badSizeKeys) PublicKey(context.Context, string) (ed25519.PublicKey, error) {
	return ed25519.PublicKey{1, 2, 3}, nil
}

// TestKeySetErrors: KeySet errors propagate; foreign errors become ErrUnavailable.
func TestKeySetErrors(t *testing.T) {
	set := buildSet(t)
	c := set.Cases[0]
	for _, tc := range []struct {
		keys verifier.KeySet
		want error
	}{
		{failingKeys{verifier.ErrUnavailable}, verifier.ErrUnavailable},
		{failingKeys{verifier.ErrUnknownKey}, verifier.ErrUnknownKey},
		{failingKeys{errors.New("dial tcp: refused")}, verifier.ErrUnavailable},
		{badSizeKeys{}, verifier.ErrBadSignature},
	} {
		v, err := verifier.New(tc.keys, set.Config(c))
		require.NoError(t, err)
		_, err = v.Verify(context.Background(), set.Valid, c.Expect())
		require.ErrorIs(t, err, tc.want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	v := tokencases.Verifier(t, set, set.Config(c))
	_, err := v.Verify(ctx, set.Valid, c.Expect()) // StaticKeys ignores ctx
	require.NoError(t, err)
}

// TestConcurrent runs the table from many goroutines on one Verifier (-race).
func TestConcurrent(t *testing.T) {
	set := buildSet(t)
	c := set.Cases[0]
	v := tokencases.Verifier(t, set, set.Config(c))
	done := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func() {
			for i := 0; i < 200; i++ {
				if _, err := v.Verify(context.Background(), set.Valid, c.Expect()); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for g := 0; g < 8; g++ {
		require.NoError(t, <-done)
	}
}

func TestStaticKeys(t *testing.T) {
	pub := tokencases.Key("a").Public().(ed25519.PublicKey)
	m := map[string]ed25519.PublicKey{"b": pub, "a": pub}
	s := verifier.NewStaticKeys(m)
	delete(m, "a") // copied
	require.Equal(t, []string{"a", "b"}, s.KeyIDs())
	got, err := s.PublicKey(context.Background(), "a")
	require.NoError(t, err)
	require.Equal(t, pub, got)
	_, err = s.PublicKey(context.Background(), strings.Repeat("z", 500))
	require.ErrorIs(t, err, verifier.ErrUnknownKey)
	require.Less(t, len(err.Error()), 150)
	require.Contains(t, err.Error(), `"zzz`)
}

func TestCodeString(t *testing.T) {
	require.Equal(t, "expired", verifier.CodeExpired.String())
	require.Equal(t, verifier.CodeOK, verifier.CodeOf(nil))
}
