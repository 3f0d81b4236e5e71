package orderservice_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/examples/orderservice"
	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/verifier"
)

type fixture struct {
	ring *keys.Ring
	svc  *orderservice.Service
	srv  *httptest.Server

	mu   sync.Mutex
	next error // what the completer answers next
	seen []string
	raw  []string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	v, err := verifier.New(ring, verifier.Config{Issuer: "flashgate", Audience: "orders"})
	require.NoError(t, err)
	f := &fixture{ring: ring}
	f.svc = orderservice.New(orderservice.Options{Verifier: v, UserHeader: "X-User-ID", Logger: slog.New(slog.DiscardHandler),
		Completer: completerFunc(func(ctx context.Context, tok *verifier.Token) (*flashgate.Completion, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.raw = append(f.raw, tok.Raw)
			for _, id := range f.seen {
				if id == tok.ID {
					return &flashgate.Completion{AdmissionID: tok.ID, Repeated: true}, nil
				}
			}
			if err := f.next; err != nil {
				return nil, err
			}
			f.seen = append(f.seen, tok.ID)
			return &flashgate.Completion{AdmissionID: tok.ID}, nil
		})})
	f.srv = httptest.NewServer(f.svc)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) token(t *testing.T, user, product, jti string) string {
	t.Helper()
	now := time.Now().Unix()
	b, _ := json.Marshal(map[string]any{"iss": "flashgate", "aud": "orders", "sub": user, "product": product,
		"jti": jti, "iat": now, "exp": now + 60})
	tok, err := f.ring.Sign(b)
	require.NoError(t, err)
	return tok
}

func (f *fixture) order(t *testing.T, product, token, user string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/orders/"+product, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if user != "" {
		req.Header.Set("X-User-ID", user)
	}
	resp, err := f.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	if resp.StatusCode >= 400 {
		assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, body
}

func TestOrderFlow(t *testing.T) {
	f := newFixture(t)
	tok := f.token(t, "alice", "sneaker", "1.1.1")

	status, body := f.order(t, "sneaker", tok, "alice")
	require.Equal(t, http.StatusCreated, status, body)
	assert.Equal(t, "alice", body["user"])
	assert.Equal(t, "sneaker", body["product"])
	assert.Equal(t, "1.1.1", body["admission_id"])
	assert.True(t, strings.HasPrefix(body["order_id"].(string), "ord_"))
	assert.Equal(t, []string{tok}, f.raw, "the completer sees the raw token")

	status, body = f.order(t, "sneaker", tok, "alice")
	assert.Equal(t, http.StatusConflict, status, "replay")
	assert.Equal(t, "completed", body["reason"])

	status, body = f.order(t, "boots", tok, "alice")
	assert.Equal(t, http.StatusForbidden, status)
	assert.Equal(t, "bad_product", body["reason"])

	status, body = f.order(t, "sneaker", f.token(t, "alice", "sneaker", "2.2.2"), "mallory")
	assert.Equal(t, http.StatusForbidden, status)
	assert.Equal(t, "bad_user", body["reason"])

	status, body = f.order(t, "sneaker", "", "alice")
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Equal(t, "missing", body["reason"])

	parts := strings.Split(f.token(t, "alice", "sneaker", "3.3.3"), ".")
	other := strings.Split(f.token(t, "bob", "sneaker", "4.4.4"), ".")
	status, body = f.order(t, "sneaker", parts[0]+"."+other[1]+"."+parts[2], "")
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Equal(t, "bad_signature", body["reason"])

	st := f.svc.Stats()
	assert.Equal(t, int64(1), st.Orders)
	assert.Equal(t, int64(2), st.Verified, "the order and its replay")
	assert.Equal(t, map[string]int64{"completed": 1, "bad_product": 1, "bad_user": 1, "missing": 1,
		"bad_signature": 1}, st.Rejections)
}

func TestCompletionErrors(t *testing.T) {
	f := newFixture(t)
	for i, tc := range []struct {
		err    error
		status int
		reason string
	}{
		{flashgate.ErrExpired, http.StatusGone, "expired"},
		{flashgate.ErrRevoked, http.StatusGone, "revoked"},
		{flashgate.ErrNotFound, http.StatusNotFound, "not_found"}, // package problem's table (was 410 here alone)
		{flashgate.ErrCompleted, http.StatusConflict, "completed"},
		{flashgate.ErrOwnerMismatch, http.StatusForbidden, "token_owner_mismatch"},
		{&flashgate.Error{Code: flashgate.CodeUnavailable, Message: "down"}, http.StatusServiceUnavailable, "unavailable"},
		{errors.New("boom"), http.StatusInternalServerError, "internal"},
	} {
		f.mu.Lock()
		f.next = tc.err
		f.mu.Unlock()
		status, body := f.order(t, "sneaker", f.token(t, "alice", "sneaker", "9."+string(rune('a'+i))+".1"), "")
		assert.Equal(t, tc.status, status, tc.reason)
		assert.Equal(t, tc.reason, body["reason"])
	}
	assert.Zero(t, f.svc.Stats().Orders)
}

type completerFunc func(ctx context.Context, tok *verifier.Token) (*flashgate.Completion, error)

func (f completerFunc) Complete(ctx context.Context, tok *verifier.Token) (*flashgate.Completion, error) {
	return f(ctx, tok)
}
