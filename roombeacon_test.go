package flashgate_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/verifier"
)

func TestBeaconProfileMatchesVerifier(t *testing.T) {
	require.Equal(t, verifier.BeaconType, flashgate.BeaconType)
	for _, other := range []string{flashgate.TokenType, flashgate.InviteType, flashgate.ReceiptType} {
		require.NotEqual(t, other, flashgate.BeaconType, "a beacon is never another document")
	}
	require.Equal(t, `{"alg":"EdDSA","kid":"k","typ":"flashgate-beacon+jwt"}`, string(flashgate.BeaconHeader("k").JSON()))
}
