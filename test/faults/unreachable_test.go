package faults_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/examples/orderservice"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/order"
	"github.com/flashgate/flashgate/server"
	"github.com/flashgate/flashgate/verifier"
)

// TestRedisUnreachable: with Redis gone, admission tokens still verify
// offline (the keys are in memory), but nothing completes: every path to
// completion fails closed with a retryable answer.
//
// What would make it fail: a verifier that consulted Redis (or the issuer)
// per token; a completion path that treated "Redis did not answer" as
// success, or as a final refusal (410/500) instead of ErrUnavailable / 503
// with Retry-After; an order service that mapped the error to 500.
func TestRedisUnreachable(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ring := newRing(t)
	is, err := issuer.New(issuer.Config{Redis: rdb, Signer: ring, WaitingSecret: secret, Logger: quiet})
	require.NoError(t, err)
	room := redistest.Room("offline")
	_, err = is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 5})
	require.NoError(t, err)
	e, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	require.Equal(t, flashgate.StateActive, e.State, "fast track")
	adm, err := is.Exchange(ctx, room, "alice", e.WaitingToken)
	require.NoError(t, err)

	// The order service's view: keys from the JWKS document, held in memory.
	jwks, err := ring.PublicJWKS()
	require.NoError(t, err)
	ks, err := verifier.ParseJWKS(jwks)
	require.NoError(t, err)
	v, err := verifier.New(ks, verifier.Config{Issuer: "flashgate", Audience: "orders"})
	require.NoError(t, err)
	chk, err := order.NewRedis(rdb, nil)
	require.NoError(t, err)

	base := serve(t, is, ring, "")
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: nil}}
	orderOverRedis := httptest.NewServer(orderservice.New(orderservice.Options{Verifier: v, Logger: quiet,
		Completer: chk}))
	t.Cleanup(orderOverRedis.Close)
	overHTTP, err := order.NewHTTP(base, &order.HTTPConfig{Client: hc})
	require.NoError(t, err)
	orderOverHTTP := httptest.NewServer(orderservice.New(orderservice.Options{Verifier: v, Logger: quiet,
		Completer: overHTTP}))
	t.Cleanup(orderOverHTTP.Close)

	srv.Kill()

	t.Run("verifier works offline", func(t *testing.T) {
		tok, err := v.Verify(ctx, adm.Token, verifier.Expect{Product: room, User: "alice"})
		require.NoError(t, err)
		assert.Equal(t, adm.ID, tok.ID)
		assert.Equal(t, room, tok.Product)
		assert.Equal(t, "alice", tok.User)
	})

	t.Run("order.Redis fails closed", func(t *testing.T) {
		tok, err := v.Verify(ctx, adm.Token, verifier.Expect{Product: room})
		require.NoError(t, err)
		c, err := chk.Complete(ctx, tok)
		assert.ErrorIs(t, err, flashgate.ErrUnavailable)
		assert.Nil(t, c)
		assert.ErrorIs(t, chk.CheckActive(ctx, tok), flashgate.ErrUnavailable)
	})

	t.Run("issuer /v1/complete answers 503", func(t *testing.T) {
		a := do(hc, http.MethodPost, base+"/v1/complete?product="+room, "", adm.Token)
		assert.True(t, isUnavailable(a), "%s", a)
		assert.Equal(t, "1", a.retryAfter)
	})

	for name, url := range map[string]string{"over redis": orderOverRedis.URL, "over the issuer": orderOverHTTP.URL} {
		t.Run("order service "+name+" answers 503", func(t *testing.T) {
			a := do(hc, http.MethodPost, url+"/orders/"+room, "", adm.Token)
			require.NoError(t, a.Err)
			assert.Equal(t, http.StatusServiceUnavailable, a.status, "%s", a)
			assert.Equal(t, "application/problem+json", a.contentType)
			assert.NotEmpty(t, a.retryAfter, "%s", a)
		})
	}

	// Redis comes back empty (persistence off): the admission is gone, and
	// it still does not complete — refused, not accepted.
	require.NoError(t, srv.Restart())
	tok, err := v.Verify(ctx, adm.Token, verifier.Expect{Product: room})
	require.NoError(t, err)
	var c *flashgate.Completion
	eventually(t, 20*time.Second, "Redis to answer again", func() bool {
		c, err = chk.Complete(ctx, tok)
		return !flashgate.ErrUnavailable.Is(err)
	})
	assert.Nil(t, c)
	assert.ErrorIs(t, err, flashgate.ErrUnknownRoom, "an admission lost with the data never completes")
}

// TestRedisHangs: a Redis that accepts connections and never answers (a
// network partition, a frozen host). Completion must give up when the
// caller's context ends, with ErrUnavailable — not hang, not succeed — and
// the verifier is unaffected. It would fail if the completion path ignored
// the context or mapped a timeout to anything but ErrUnavailable.
func TestRedisHangs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	var conns []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // held open, never read or answered
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-accepted
		for _, c := range conns {
			_ = c.Close()
		}
	})
	rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	chk, err := order.NewRedis(rdb, nil)
	require.NoError(t, err)

	ring := newRing(t)
	jwks, err := ring.PublicJWKS()
	require.NoError(t, err)
	ks, err := verifier.ParseJWKS(jwks)
	require.NoError(t, err)
	v, err := verifier.New(ks, verifier.Config{Issuer: "flashgate", Audience: "orders"})
	require.NoError(t, err)
	now := time.Now().Unix()
	tok, err := ring.Sign([]byte(`{"iss":"flashgate","aud":"orders","sub":"alice","product":"hang","jti":"e0.1.1.` +
		itoa(now*1000) + `","iat":` + itoa(now) + `,"exp":` + itoa(now+60) + `}`))
	require.NoError(t, err)
	vt, err := v.Verify(context.Background(), tok, verifier.Expect{Product: "hang", User: "alice"})
	require.NoError(t, err, "verification needs no Redis")

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	c, err := chk.Complete(ctx, vt)
	assert.Nil(t, c)
	assert.ErrorIs(t, err, flashgate.ErrUnavailable)
	assert.ErrorIs(t, chk.CheckActive(ctx, vt), flashgate.ErrUnavailable)

	// The same through the issuer's HTTP completion endpoint.
	is, err := issuer.New(issuer.Config{Redis: rdb, Logger: quiet})
	require.NoError(t, err)
	s, err := server.New(server.Options{Issuer: is, Keys: ring, Logger: quiet})
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodPost, "/v1/complete?product=hang", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := s.App().Test(req, 20_000)
	require.NoError(t, err)
	defer res.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	assert.Equal(t, "1", res.Header.Get("Retry-After"))
	assert.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))
}
