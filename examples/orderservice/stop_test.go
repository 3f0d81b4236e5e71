package orderservice_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/examples/orderservice"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/order"
	"github.com/flashgate/flashgate/server"
	"github.com/flashgate/flashgate/verifier"
	"github.com/flashgate/flashgate/verifier/remote"
)

// TestStopReachesOrderService: an order service whose verifier has a
// remote.Directives source (the issuer's directive document, max-age 1 s)
// and completes through order.Redis. After an operator's stop, an order
// with a token admitted before it is refused at once by the completion
// (room_stopped, from Redis), and by the verifier itself within max-age
// plus one fetch; a buyer's order placed before the stop stood.
func TestStopReachesOrderService(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	rdb := redistest.Client(t)
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	is, err := issuer.New(issuer.Config{Redis: rdb, Signer: ring, Issuer: "flashgate", Audience: "orders",
		WaitingSecret: secret, Logger: log})
	require.NoError(t, err)
	room := redistest.Room("stop")
	_, err = is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 5})
	require.NoError(t, err)
	srv, err := server.New(server.Options{Issuer: is, Keys: ring, AdminToken: "admin", Logger: log,
		DirectiveMaxAge: time.Second})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Listen(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	base := "http://" + ln.Addr().String()

	dctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	dirs, err := remote.NewDirectives(dctx, base+"/.well-known/flashgate-directives.json", &remote.DirectivesConfig{Logger: log})
	require.NoError(t, err)
	v, err := verifier.New(ring, verifier.Config{Issuer: "flashgate", Audience: "orders", Directives: dirs})
	require.NoError(t, err)
	completer, err := order.NewRedis(rdb, nil)
	require.NoError(t, err)
	shop := httptest.NewServer(orderservice.New(orderservice.Options{Verifier: v, Completer: completer, Logger: log}))
	t.Cleanup(shop.Close)

	admit := func(user string) string {
		e, err := is.Enter(ctx, room, user)
		require.NoError(t, err)
		a, err := is.Exchange(ctx, room, user, e.WaitingToken)
		require.NoError(t, err)
		return a.Token
	}
	post := func(method, url, bearer string) (int, map[string]any) {
		req, _ := http.NewRequest(method, url, nil)
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m), "%s", b)
		return resp.StatusCode, m
	}
	alice, bob, carol := admit("alice"), admit("bob"), admit("carol")
	status, body := post(http.MethodPost, shop.URL+"/orders/"+room, alice)
	require.Equal(t, http.StatusCreated, status, body)

	status, body = post(http.MethodPost, base+"/admin/rooms/"+room+"/stop", "admin")
	require.Equal(t, http.StatusOK, status, body)
	start := time.Now()

	// Within the cached document's max-age the token verifies, and the
	// completion refuses it from Redis.
	status, body = post(http.MethodPost, shop.URL+"/orders/"+room, bob)
	assert.Equal(t, http.StatusServiceUnavailable, status, body)
	assert.Equal(t, "room_stopped", body["reason"], "refused: %v", body)

	// Then the verifier refuses it before any completion.
	bound := time.Second + remote.DefaultDirectivesTimeout
	for {
		_, err := v.Verify(ctx, carol, verifier.Expect{Product: room})
		if err != nil {
			require.ErrorIs(t, err, verifier.ErrRoomStopped)
			break
		}
		require.Less(t, time.Since(start), bound, "the verifier still accepts the token")
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("stop → first refusal by the order service's verifier: %v (max-age 1 s)", time.Since(start).Round(time.Millisecond))
	status, body = post(http.MethodPost, shop.URL+"/orders/"+room, carol)
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Equal(t, "room_stopped", body["reason"])
	assert.Equal(t, "https://flashgate.dev/problems/token-room-stopped", body["type"], "the verifier's refusal, not the completion's")
}
