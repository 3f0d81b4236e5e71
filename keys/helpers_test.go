package keys_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// verifySig checks the Ed25519 signature of a compact JWS.
func verifySig(t *testing.T, pub ed25519.PublicKey, tok string) bool {
	t.Helper()
	i := strings.LastIndexByte(tok, '.')
	require.Positive(t, i)
	sig, err := base64.RawURLEncoding.DecodeString(tok[i+1:])
	require.NoError(t, err)
	return ed25519.Verify(pub, []byte(tok[:i]), sig)
}
