package order_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/order"
	"github.com/flashgate/flashgate/verifier"
)

// complete sends the raw token "raw" for product sneaker to the issuer at base.
func complete(t *testing.T, base string, c *http.Client, raw string) (*flashgate.Completion, error) {
	t.Helper()
	h, err := order.NewHTTP(base, &order.HTTPConfig{Client: c})
	require.NoError(t, err)
	return h.Complete(context.Background(), &verifier.Token{Product: "sneaker", Raw: raw})
}

func TestNewHTTPRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"", "queue.internal", "ftp://x", "http://", "://"} {
		_, err := order.NewHTTP(u, nil)
		assert.ErrorIs(t, err, flashgate.ErrInvalidInput, u)
	}
}

func TestParseProblemServerCodes(t *testing.T) {
	err := order.ParseProblem(http.StatusServiceUnavailable, []byte(`{"code":"not_ready"}`))
	assert.ErrorIs(t, err, flashgate.ErrUnavailable)
	err = order.ParseProblem(http.StatusUnauthorized, []byte(`{"code":"invalid_admission_token","reason":"expired"}`))
	assert.ErrorIs(t, err, flashgate.ErrExpired, "the token lapsed between the pod's check and the issuer's")
	err = order.ParseProblem(http.StatusUnauthorized, []byte(`{"code":"invalid_admission_token","reason":"bad_signature"}`))
	assert.ErrorIs(t, err, flashgate.ErrInternal, "the pod accepted a token the issuer refuses: a misconfiguration")
	err = order.ParseProblem(http.StatusServiceUnavailable, []byte(`{"code":"room_stopped"}`))
	assert.ErrorIs(t, err, flashgate.ErrRoomStopped, "an operator's stop, not a retryable outage")
}

func TestHTTPComplete(t *testing.T) {
	var gotAuth, gotProduct string
	issuerSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotProduct = r.Header.Get("Authorization"), r.URL.Query().Get("room")
		switch r.Header.Get("Authorization") {
		case "Bearer good":
			_, _ = w.Write([]byte(`{"state":"COMPLETED","admission_id":"1.1.1","completed_at_ms":1700000000123,"repeated":true}`))
		case "Bearer gone":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusGone)
			_, _ = w.Write([]byte(`{"type":"https://flashgate.dev/problems/expired","status":410,"code":"expired","detail":"admission expired"}`))
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer issuerSrv.Close()

	c, err := complete(t, issuerSrv.URL+"/", issuerSrv.Client(), "good")
	require.NoError(t, err)
	assert.Equal(t, "Bearer good", gotAuth)
	assert.Equal(t, "sneaker", gotProduct)
	assert.True(t, c.Repeated)
	assert.Equal(t, int64(1700000000123), c.CompletedAt.UnixMilli())

	_, err = complete(t, issuerSrv.URL, issuerSrv.Client(), "gone")
	assert.ErrorIs(t, err, flashgate.ErrExpired)
	_, err = complete(t, issuerSrv.URL, issuerSrv.Client(), "other")
	assert.ErrorIs(t, err, flashgate.ErrUnavailable)
	_, err = complete(t, "http://127.0.0.1:1", nil, "good")
	assert.ErrorIs(t, err, flashgate.ErrUnavailable)
}

func TestParseProblemByType(t *testing.T) {
	err := order.ParseProblem(http.StatusGone, []byte(`{"type":"https://flashgate.dev/problems/revoked"}`))
	assert.ErrorIs(t, err, flashgate.ErrRevoked)
	err = order.ParseProblem(http.StatusConflict, []byte(`not json`))
	assert.ErrorIs(t, err, flashgate.ErrCompleted)
}
