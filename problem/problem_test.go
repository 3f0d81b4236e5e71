package problem_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/problem"
	"github.com/flashgate/flashgate/verifier"
)

// Every domain code and every verifier reason has a row of its own.
func TestEveryCodeHasARow(t *testing.T) {
	for _, c := range flashgate.Codes {
		require.True(t, problem.Known(string(c)), c)
		require.Equal(t, string(c), problem.Lookup(string(c)).Code)
	}
	for c := verifier.Code(1); c.String() != "unknown"; c++ {
		k := problem.Token(c.String())
		require.NotEqual(t, "Invalid admission token", k.Title, "reason %s has no row", c)
	}
	require.Equal(t, http.StatusInternalServerError, problem.Lookup("no_such_code").Status)
}

func TestTable(t *testing.T) {
	for code, want := range map[string]int{
		"not_found": 404, "journal_off": 404, "expired": 410, "completed": 409, "not_admitted": 409, "store_full": 503,
		"unavailable": 503, "invalid_waiting_token": 401, problem.RateLimited: 429,
	} {
		require.Equal(t, want, problem.Lookup(code).Status, code)
	}
	require.Equal(t, 5, problem.Lookup("store_full").RetryAfter)
	require.Equal(t, 1, problem.Lookup("unavailable").RetryAfter)
	require.Equal(t, problem.Base+"not-admitted", problem.Lookup("not_admitted").New("x").Type)

	for reason, want := range map[string]problem.Kind{
		"missing":          {Code: problem.BadAdmission, Status: 401, Challenge: "Bearer"},
		"expired":          {Code: problem.BadAdmission, Status: 401, Challenge: `Bearer error="invalid_token"`},
		"bad_product":      {Code: problem.AdmissionScope, Status: 403, Challenge: `Bearer error="insufficient_scope"`},
		"keys_unavailable": {Code: "unavailable", Status: 503, RetryAfter: 1},
	} {
		k := problem.Token(reason)
		want.Title = k.Title
		require.Equal(t, want, k, reason)
	}
}

// Parse inverts the table: a document written from a row reads back as its
// code, by code, reason or type; without a document, by status.
func TestParseInvertsTheTable(t *testing.T) {
	for _, c := range flashgate.Codes {
		k := problem.Lookup(string(c))
		w := httptest.NewRecorder()
		k.Write(w, k.New("detail of "+string(c)))
		code, msg := problem.Parse(w.Code, w.Body.Bytes())
		require.Equal(t, string(c), code)
		require.Equal(t, "detail of "+string(c), msg)
		// Type alone.
		code, _ = problem.Parse(w.Code, []byte(`{"type":"`+problem.TypeURI(string(c))+`"}`))
		require.Equal(t, string(c), code)
	}
	for status, want := range map[int]string{410: "expired", 409: "completed", 404: "not_found", 502: "unavailable", 418: "internal"} {
		code, msg := problem.Parse(status, []byte("<html>"))
		require.Equal(t, want, code, status)
		require.NotEmpty(t, msg)
	}
}

func TestBearer(t *testing.T) {
	for h, want := range map[string]string{"Bearer abc": "abc", "bearer  abc": "abc", "BEARER x.y.z": "x.y.z"} {
		got, ok := problem.Bearer(h)
		require.True(t, ok, h)
		require.Equal(t, want, got)
	}
	for _, h := range []string{"", "Bearer", "Bearer ", "Basic abc", "Bearerabc", "Bearer    "} {
		_, ok := problem.Bearer(h)
		require.False(t, ok, h)
	}
}

func TestWriteSetsHeaders(t *testing.T) {
	w := httptest.NewRecorder()
	k := problem.Lookup("store_full")
	k.Write(w, k.New("full"))
	require.Equal(t, 503, w.Code)
	require.Equal(t, "5", w.Header().Get("Retry-After"))
	require.Equal(t, "no-store", w.Header().Get("Cache-Control"))
	require.Equal(t, problem.ContentType, w.Header().Get("Content-Type"))
}
