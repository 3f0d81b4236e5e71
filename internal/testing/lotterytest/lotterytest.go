// Package lotterytest runs a live issuer for the join-receipt tests of
// other packages (`flashgate lottery verify`, js/flashgate-verifier's
// verifyReceipt): a real redis-server, a keys.Ring that signs receipts, the
// HTTP server on a loopback port, and a clock the test moves to the opening.
package lotterytest

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/internal/testing/testkit"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/server"
)

// Issuer is the iss of the receipts the live issuer signs.
const Issuer = "https://q.test"

// Env is a live issuer.
type Env struct {
	Is    *issuer.Issuer
	Ring  *keys.Ring
	Clock *testkit.Clock
	Base  string // http://127.0.0.1:port
}

// Start starts the live issuer; it stops with the test.
func Start(t *testing.T) *Env {
	t.Helper()
	rdb := redistest.Start(t).Client(t)
	clk := testkit.NewClock(testkit.Epoch.Local())
	ring, err := keys.Generate(clk.Now())
	require.NoError(t, err)
	is, err := issuer.New(issuer.Config{Redis: rdb, Signer: ring, WaitingSecret: []byte(strings.Repeat("s", 32)),
		Issuer: Issuer, Now: clk.Now})
	require.NoError(t, err)
	srv, err := server.New(server.Options{Issuer: is, Keys: ring, AdminToken: "admin"})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Listen(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return &Env{Is: is, Ring: ring, Clock: clk, Base: "http://" + ln.Addr().String()}
}

// ShuffleRoom configures room as a shuffle room (capacity 1) opening at opens.
func (e *Env) ShuffleRoom(t *testing.T, room string, opens time.Time) {
	t.Helper()
	_, err := e.Is.SetRoom(context.Background(), room, issuer.RoomConfig{Capacity: 1, RatePerMinute: 6000, Opens: opens,
		PreQueue: issuer.PreQueueShuffle})
	require.NoError(t, err)
}

// EnterAll enters users u1 … un in room's pre-queue and returns each
// one's receipt and waiting token.
func (e *Env) EnterAll(t *testing.T, room string, n int) (receipts, tokens map[string]string) {
	t.Helper()
	receipts, tokens = map[string]string{}, map[string]string{}
	for i := 1; i <= n; i++ {
		u := "u" + strconv.Itoa(i)
		en, err := e.Is.Enter(context.Background(), room, u)
		require.NoError(t, err)
		require.True(t, en.PreQueue, u)
		require.NotEmpty(t, en.Receipt, u)
		receipts[u], tokens[u] = en.Receipt, en.WaitingToken
	}
	return receipts, tokens
}

// Open moves the clock to opens and ticks room: the lottery is drawn and
// placed, and the first drawn is admitted (capacity 1).
func (e *Env) Open(t *testing.T, room string, opens time.Time) {
	t.Helper()
	e.Clock.Set(opens)
	_, err := e.Is.Tick(context.Background(), room)
	require.NoError(t, err)
}
