package verifier_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/tokencases"
	"github.com/flashgate/flashgate/verifier"
)

// fixedDirectives answers every room with nb, or err.
type fixedDirectives struct {
	nb  map[string]int64
	err error
}

func (f fixedDirectives) NotBefore(_ context.Context, room string) (int64, error) {
	return f.nb[room], f.err
}

// TestDirectiveStep: step 14 refuses a token of a stopped room issued
// before not_before (room_stopped) and passes one issued at it; a source
// without a document refuses (directives_unavailable, also for a foreign
// error); a forged token still reports bad_signature; other rooms are not
// affected.
func TestDirectiveStep(t *testing.T) {
	set := buildSet(t)
	c := set.Cases[0]
	ok, err := tokencases.Verifier(t, set, set.Config(c)).Verify(context.Background(), set.Valid, c.Expect())
	require.NoError(t, err)
	iat := ok.IssuedAt.Unix()
	run := func(d verifier.Directives, raw string) error {
		cfg := set.Config(c)
		cfg.Directives = d
		v, err := verifier.New(set.Keys(t), cfg)
		require.NoError(t, err)
		_, err = v.Verify(context.Background(), raw, c.Expect())
		return err
	}
	product := c.Expect().Product
	if product == "" {
		product = set.Config(c).Product
	}
	stopped := fixedDirectives{nb: map[string]int64{product: iat + 1}}
	assert.ErrorIs(t, run(stopped, set.Valid), verifier.ErrRoomStopped)
	assert.NoError(t, run(fixedDirectives{nb: map[string]int64{product: iat}}, set.Valid), "iat == not_before passes")
	assert.NoError(t, run(fixedDirectives{nb: map[string]int64{"other": iat + 1}}, set.Valid))
	assert.ErrorIs(t, run(fixedDirectives{err: verifier.ErrDirectivesUnavailable}, set.Valid), verifier.ErrDirectivesUnavailable)
	assert.ErrorIs(t, run(fixedDirectives{err: errors.New("dial tcp: refused")}, set.Valid), verifier.ErrDirectivesUnavailable)
	i := strings.LastIndexByte(set.Valid, '.')
	forged := set.Valid[:i+1] + strings.Repeat("A", len(set.Valid)-i-1)
	assert.ErrorIs(t, run(stopped, forged), verifier.ErrBadSignature, "the signature's verdict comes first")

	assert.NoError(t, verifier.CheckNotBefore(100, 0))
	assert.NoError(t, verifier.CheckNotBefore(100, 100))
	assert.Equal(t, verifier.CodeRoomStopped, verifier.CodeOf(verifier.CheckNotBefore(99, 100)))
}
