package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/lotterytest"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/keys"
)

// TestLotteryVerify: receipts handed out before the draw, checked after it
// by `flashgate lottery verify` against the issuer's public JWKS and room
// view over HTTP (a real redis-server issuer), each print the place the
// line then gives its holder; every failure has its exit status.
func TestLotteryVerify(t *testing.T) {
	ctx := context.Background()
	live := lotterytest.Start(t)
	is, ring, clk, base := live.Is, live.Ring, live.Clock, live.Base
	room := redistest.Room("cli-lottery")
	opens := clk.Now().Add(time.Minute)
	live.ShuffleRoom(t, room, opens)
	const pre = 12
	receipts, toks := live.EnterAll(t, room, pre)
	verify := func(args ...string) (int, map[string]any) {
		t.Helper()
		r := runCLI(t, "", append([]string{"lottery", "verify"}, args...)...)
		var out map[string]any
		if r.code != exitUsage {
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), "stdout %q stderr %q", r.stdout, r.stderr)
		}
		return r.code, out
	}

	code, out := verify("--receipt", receipts["u1"], "--url", base)
	assert.Equal(t, exitNotDrawn, code, "before the opening: %v", out)
	assert.Equal(t, "not_drawn", out["reason"])

	live.Open(t, room, opens)

	// The waiting page's download: a JSON file with the receipt.
	dir := t.TempDir()
	file := filepath.Join(dir, "receipt.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"receipt":"`+receipts["u1"]+`","room":"`+room+`"}`), 0o600))
	for i := 1; i <= pre; i++ {
		u := "u" + strconv.Itoa(i)
		r := receipts[u]
		if i == 1 {
			r = file
		}
		code, out := verify("--receipt", r, "--url", base)
		require.Equal(t, exitOK, code, "%s: %v", u, out)
		assert.Equal(t, true, out["valid"])
		assert.Equal(t, u, out["user"])
		assert.EqualValues(t, i, out["arrival"])
		assert.EqualValues(t, pre, out["cutoff"])
		st, err := is.Status(ctx, room, u, toks[u])
		require.NoError(t, err)
		if out["place"] == float64(1) {
			assert.Equal(t, flashgate.StateActive, st.State, "drawn first, admitted (capacity 1)")
		} else {
			assert.EqualValues(t, out["place"].(float64)-1, st.Position, u)
		}
	}

	// Files for the JWKS and the room view, the latter with a changed seed.
	jwks, err := ring.PublicJWKS()
	require.NoError(t, err)
	jwksFile := filepath.Join(dir, "jwks.json")
	require.NoError(t, os.WriteFile(jwksFile, jwks, 0o600))
	view, err := fetchPublic(ctx, base+"/v1/rooms/"+room)
	require.NoError(t, err)
	viewFile := filepath.Join(dir, "view.json")
	require.NoError(t, os.WriteFile(viewFile, view, 0o600))
	code, _ = verify("--receipt", receipts["u2"], "--jwks", jwksFile, "--room-view", viewFile)
	assert.Equal(t, exitOK, code, "from files")
	var rv map[string]any
	require.NoError(t, json.Unmarshal(view, &rv))
	rv["lottery"].(map[string]any)["seed"] = strings.Repeat("0", 32)
	changed, _ := json.Marshal(rv)
	changedFile := filepath.Join(dir, "changed.json")
	require.NoError(t, os.WriteFile(changedFile, changed, 0o600))
	code, out = verify("--receipt", receipts["u2"], "--jwks", jwksFile, "--room-view", changedFile)
	assert.Equal(t, exitSeedMismatch, code, "a changed seed: %v", out)
	assert.Equal(t, "seed_mismatch", out["reason"])

	other, err := keys.Generate(clk.Now())
	require.NoError(t, err)
	claims := flashgate.ReceiptClaims{Iss: lotterytest.Issuer, Room: room, Epoch: rv["epoch"].(string), Sub: "u2", Arrival: 2,
		Iat: clk.Now().Unix(), Commitment: rv["lottery"].(map[string]any)["commitment"].(string)}
	forged, err := other.SignReceipt(claims.JSON())
	require.NoError(t, err)
	code, out = verify("--receipt", forged, "--url", base)
	assert.Equal(t, exitReceiptInvalid, code, "forged: %v", out)
	assert.Equal(t, "receipt_invalid", out["reason"])

	claims.Arrival = pre + 5
	late, err := ring.SignReceipt(claims.JSON())
	require.NoError(t, err)
	code, _ = verify("--receipt", late, "--url", base)
	assert.Equal(t, exitNotInPreQueue, code, "an arrival after the cutoff")

	room2 := redistest.Room("cli-lottery2")
	live.ShuffleRoom(t, room2, clk.Now().Add(time.Hour))
	e2, err := is.Enter(ctx, room2, "u1")
	require.NoError(t, err)
	code, _ = verify("--receipt", e2.Receipt, "--jwks", jwksFile, "--room-view", viewFile)
	assert.Equal(t, exitOtherRoom, code, "another room's receipt")

	code, out = verify("--receipt", receipts["u3"], "--jwks", filepath.Join(dir, "missing.json"), "--room-view", viewFile)
	assert.Equal(t, exitLotteryInput, code)
	assert.Equal(t, "jwks_unavailable", out["reason"])
	code, _ = verify("--receipt", receipts["u3"])
	assert.Equal(t, exitUsage, code, "no --url, --jwks or --room-view")
}
