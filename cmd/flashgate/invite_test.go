package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/server"
)

// TestInviteCLI: `flashgate invite` signs with the key ring file invites an
// issuer on that ring accepts (and one with another iss refuses).
func TestInviteCLI(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ring.json")
	require.Equal(t, exitOK, runCLI(t, "", "keys", "generate", "-file", file).code)

	r := runCLI(t, "", "invite", "-file", file)
	assert.Equal(t, exitUsage, r.code, "-room is required")
	r = runCLI(t, "", "invite", "-file", file, "-room", "r", "-lane", "vip")
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "lane")

	r = runCLI(t, "", "invite", "-file", file, "-room", "sale", "-count", "2", "-issuer", "https://iss.test")
	require.Equal(t, exitOK, r.code, r.stderr)
	toks := strings.Fields(r.stdout)
	require.Len(t, toks, 2)

	r = runCLI(t, "", "invite", "-file", file, "-room", "sale", "-lane", "bypass", "-user", "bob", "-ttl", "1h", "-json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var out server.InvitesResponse
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.Len(t, out.Invites, 1)
	assert.Equal(t, "bypass", out.Invites[0].Lane)
	assert.Equal(t, "bob", out.Invites[0].User)
	assert.True(t, out.Invites[0].SingleUse, "single use unless -reusable")
	r = runCLI(t, "", "invite", "-file", file, "-room", "sale", "-reusable", "-json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var re server.InvitesResponse
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &re))
	assert.False(t, re.Invites[0].SingleUse)
	r = runCLI(t, "", "invite", "-file", file, "-room", "sale", "-single-use")
	assert.Equal(t, exitOK, r.code, "-single-use (now the default) is still accepted: %s", r.stderr)
	for _, args := range [][]string{{"-single-use=false"}, {"-single-use", "-reusable"}} {
		r = runCLI(t, "", append([]string{"invite", "-file", file, "-room", "sale"}, args...)...)
		assert.Equal(t, exitUsage, r.code, "%v", args)
		assert.Contains(t, r.stderr, "-reusable", "%v", args)
	}

	ring, err := keys.Load(file)
	require.NoError(t, err)
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	is, err := issuer.New(issuer.Config{Redis: rdb, Signer: ring, Issuer: "https://iss.test",
		WaitingSecret: []byte("0123456789abcdef0123456789abcdef")})
	require.NoError(t, err)
	_, err = is.SetRoom(ctx, "sale", issuer.RoomConfig{State: issuer.RoomPaused})
	require.NoError(t, err)
	e, err := is.EnterWithInvite(ctx, "sale", "alice", toks[0])
	require.NoError(t, err)
	assert.Equal(t, flashgate.LanePriority, e.Lane)
	_, err = is.EnterWithInvite(ctx, "sale", "carol", toks[0])
	assert.ErrorIs(t, err, flashgate.ErrInviteUsed, "the CLI's invites are single use by default")
	_, err = is.EnterWithInvite(ctx, "sale", "bob", out.Invites[0].Token)
	assert.ErrorIs(t, err, flashgate.ErrInviteInvalid, "signed for the default issuer, not https://iss.test")
}
