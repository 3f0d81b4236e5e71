package verifierjs

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
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
	"github.com/flashgate/flashgate/internal/redistest"
	"github.com/flashgate/flashgate/internal/testkit"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/server"
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
	rdb := redistest.Start(t).Client(t)
	clk := testkit.NewClock(testkit.Epoch.Local())
	ring, err := keys.Generate(clk.Now())
	require.NoError(t, err)
	is, err := issuer.New(issuer.Config{Redis: rdb, Signer: ring, WaitingSecret: []byte(strings.Repeat("s", 32)),
		Issuer: "https://q.test", Now: clk.Now})
	require.NoError(t, err)
	srv, err := server.New(server.Options{Issuer: is, Keys: ring, AdminToken: "admin"})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Listen(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	base := "http://" + ln.Addr().String()
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
	for _, r := range []string{room, room + "-2"} {
		_, err = is.SetRoom(ctx, r, issuer.RoomConfig{Capacity: 1, RatePerMinute: 6000, Opens: opens,
			PreQueue: issuer.PreQueueShuffle})
		require.NoError(t, err)
	}
	const pre = 20
	receipts, toks := map[string]string{}, map[string]string{}
	for i := 1; i <= pre; i++ {
		u := "u" + strconv.Itoa(i)
		e, err := is.Enter(ctx, room, u)
		require.NoError(t, err)
		require.NotEmpty(t, e.Receipt)
		receipts[u], toks[u] = e.Receipt, e.WaitingToken
	}
	other, err := is.Enter(ctx, room+"-2", "u1")
	require.NoError(t, err)
	before := get("/v1/rooms/" + room)

	clk.Set(opens)
	_, err = is.Tick(ctx, room)
	require.NoError(t, err)

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
