package flashgate_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/verifier"
)

func TestAdmissionIDRoundTrip(t *testing.T) {
	id := flashgate.AdmissionID{Epoch: "hoeiiktxjt", Arrival: 42, Number: 7, AdmittedAt: time.UnixMilli(1795223021233)}
	got, ok := flashgate.ParseAdmissionID(id.String())
	require.True(t, ok)
	require.Equal(t, id.String(), "hoeiiktxjt.42.7.1795223021233")
	require.True(t, got.AdmittedAt.Equal(id.AdmittedAt))
	got.AdmittedAt = id.AdmittedAt
	require.Equal(t, id, got)
	for _, bad := range []string{"", "1.2.3", "e.1.2.3.4", "E.1.2.3", "e.0.1.1", "e.1.0.1", "e.x.1.1",
		"e.1.1.x", "abcdefghijklmn.1.1.1", ".1.1.1"} {
		_, ok := flashgate.ParseAdmissionID(bad)
		require.False(t, ok, bad)
	}
}

func TestErrorsCompareByCode(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", flashgate.Errorf(flashgate.CodeExpired, "admission %s lapsed", "x"))
	require.ErrorIs(t, err, flashgate.ErrExpired)
	require.NotErrorIs(t, err, flashgate.ErrRevoked)
	require.Equal(t, flashgate.CodeExpired, flashgate.ErrorCode(err))
	require.Equal(t, flashgate.CodeInternal, flashgate.ErrorCode(errors.New("boom")))
	require.Equal(t, flashgate.Code(""), flashgate.ErrorCode(nil))
	require.Len(t, flashgate.Codes, 23)
}

// The verifier core keeps its own copy of the token profile (TinyGo): the
// two must not drift.
func TestTokenProfileMatchesVerifier(t *testing.T) {
	require.Equal(t, verifier.TokenType, flashgate.TokenType)
	require.Equal(t, verifier.Alg, flashgate.Alg)
	require.Equal(t, verifier.ProductClaim, flashgate.ProductClaim)
	require.NotEqual(t, verifier.TokenType, flashgate.InviteType, "an invite is never an admission token")
	require.Equal(t, `{"alg":"EdDSA","kid":"k1","typ":"flashgate-admission+jwt"}`, string(flashgate.NewHeader("k1").JSON()))
	c := flashgate.NewClaims("fg", "orders", "alice", "sku-1", "e.1.1.1000", time.UnixMilli(1999), time.UnixMilli(301999))
	require.Equal(t, `{"iss":"fg","aud":"orders","sub":"alice","product":"sku-1","jti":"e.1.1.1000","iat":1,"exp":301}`, string(c.JSON()))
}
