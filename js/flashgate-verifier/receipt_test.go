package verifierjs

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
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
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
)

// TestNodeVerifyReceipt: join receipts a real redis-server issuer signed
// before the draw are checked in Node by verifyReceipt against the issuer's
// public JWKS and room view over HTTP after it; each proves the place the
// issuer's line then gives its holder, and a receipt checked before the
// draw, against a changed seed, forged, tampered, an admission token,
// another room's or after the cutoff is refused with its reason.
func TestNodeVerifyReceipt(t *testing.T) {
	node, err := exec.LookPath("node")
	require.NoError(t, err, "node (≥ 20) is required to test flashgate-verifier")
	ctx := context.Background()
	live := lotterytest.Start(t)
	is, ring, clk, base := live.Is, live.Ring, live.Clock, live.Base
	get := func(path string) []byte {
		resp, err := http.Get(base + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode, "%s", b)
		return b
	}

	room := redistest.Room("js-lottery")
	opens := clk.Now().Add(time.Minute)
	live.ShuffleRoom(t, room, opens)
	live.ShuffleRoom(t, room+"-2", opens)
	const pre = 20
	receipts, toks := live.EnterAll(t, room, pre)
	other, err := is.Enter(ctx, room+"-2", "u1")
	require.NoError(t, err)
	before := get("/v1/rooms/" + room)

	live.Open(t, room, opens)

	var claims flashgate.ReceiptClaims
	payload, err := base64.RawURLEncoding.DecodeString(strings.Split(receipts["u2"], ".")[1])
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(payload, &claims))
	stranger, err := keys.Generate(clk.Now())
	require.NoError(t, err)
	forged, err := stranger.SignReceipt(claims.JSON())
	require.NoError(t, err)
	admission, err := ring.Sign(claims.JSON())
	require.NoError(t, err)
	parts := strings.Split(receipts["u2"], ".")
	earlier := claims
	earlier.Arrival = 1
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(earlier.JSON()) + "." + parts[2]
	after := claims
	after.Arrival = pre + 3
	late, err := ring.SignReceipt(after.JSON())
	require.NoError(t, err)

	fixture, err := json.Marshal(map[string]any{"base": base, "room": room, "receipts": receipts,
		"before_view": string(before), "forged": forged, "tampered": tampered, "admission_token": admission,
		"other_room": other.Receipt, "late": late})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "fixture.json")
	require.NoError(t, os.WriteFile(path, fixture, 0o600))
	cmd := exec.Command(node, filepath.Join("test", "receipt_check.mjs"))
	cmd.Env = append(os.Environ(), "RECEIPT_FIXTURE="+path)
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, "node: %s%s", out, stderr)
	var got struct {
		Places  map[string]int64  `json:"places"`
		Reasons map[string]string `json:"reasons"`
	}
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)

	lv, err := is.RoomLottery(ctx, room)
	require.NoError(t, err)
	require.Len(t, got.Places, pre)
	for i := 1; i <= pre; i++ {
		u := "u" + strconv.Itoa(i)
		assert.Equal(t, issuer.LotteryPlace(lv.Seed, lv.Epoch, lv.Cutoff, int64(i)), got.Places[u], u+": as Go computes it")
		st, err := is.Status(ctx, room, u, toks[u])
		require.NoError(t, err)
		if got.Places[u] == 1 {
			assert.Equal(t, flashgate.StateActive, st.State, u+": drawn first, admitted (capacity 1)")
		} else {
			assert.Equal(t, got.Places[u]-1, st.Position, u+": the place the line gives")
		}
	}
	assert.Equal(t, map[string]string{
		"before": "not_drawn", "changed_seed": "seed_mismatch", "forged": "receipt_invalid", "tampered": "receipt_invalid",
		"admission_token": "receipt_invalid", "other_room": "other_room", "late": "not_in_prequeue", "no_view": "input_unavailable",
	}, got.Reasons)
}
