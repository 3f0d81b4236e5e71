package worker_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/server"
)

// TestWorkerStop measures, in workerd, the time from an operator's stop
// (POST /admin/rooms/{room}/stop) to the first refusal of an admitted
// buyer's token at the edge: it must be at most the directive max-age
// (server.DefaultDirectiveMaxAge, 5 s) plus one fetch (the package's
// fetchTimeoutMs, 5 s). Completion refuses the same token at once.
func TestWorkerStop(t *testing.T) {
	e := newEnv(t, "host")
	token, _ := e.admit("alice")
	path := "/products/" + e.room + "/buy?case=stop-before"
	r := e.get(path, token, "bearer", acceptJSON, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.EqualValues(t, 1, e.dirGets.Load(), "the directive document is fetched once, at create")

	req, err := http.NewRequest(http.MethodPost, e.issuer+"/admin/rooms/"+e.room+"/stop", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer admin-secret")
	start := time.Now()
	resp, err := e.client.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var st server.StopResponse
	require.NoError(t, json.Unmarshal(body, &st))
	require.True(t, st.Paused)

	// Completion refuses it at once.
	creq, err := http.NewRequest(http.MethodPost, e.issuer+"/v1/complete?product="+e.room, nil)
	require.NoError(t, err)
	creq.Header.Set("X-User-ID", "alice")
	creq.Header.Set("Authorization", "Bearer "+token)
	cresp, err := e.client.Do(creq)
	require.NoError(t, err)
	cbody, _ := io.ReadAll(cresp.Body)
	_ = cresp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, cresp.StatusCode, "%s", cbody)
	require.Contains(t, string(cbody), `"code":"room_stopped"`)

	bound := server.DefaultDirectiveMaxAge + 5*time.Second // max-age + one fetch (fetchTimeoutMs)
	var elapsed time.Duration
	for {
		r = e.get("/products/"+e.room+"/buy?case=stop-poll", token, "bearer", acceptJSON, nil)
		elapsed = time.Since(start)
		if r.status != http.StatusOK {
			break
		}
		require.Less(t, elapsed, bound, "still admitted %v after the stop", elapsed)
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("stop → first refusal at the edge: %v (bound %v; directive fetches %d)", elapsed.Round(time.Millisecond), bound, e.dirGets.Load())
	require.LessOrEqual(t, elapsed, bound)
	e.refused("stop-after", e.room, token, "bearer", http.StatusServiceUnavailable, "room_stopped")
}

// stubIssuer serves jwks (with Cache-Control cacheControl, "" for none) and
// an edge directive document naming no stop (max-age 5 s, as flashgate
// serve's default) until the test ends.
func stubIssuer(tb testing.TB, jwks []byte, cacheControl string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/.well-known/flashgate-directives.json" {
			w.Header().Set("Cache-Control", "public, max-age=5")
			_, _ = w.Write([]byte(`{"rooms":{}}`))
			return
		}
		if cacheControl != "" {
			w.Header().Set("Cache-Control", cacheControl)
		}
		_, _ = w.Write(jwks)
	}))
	tb.Cleanup(srv.Close)
	return srv
}
