package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestStopWiring: stop POSTs /admin/rooms/{room}/stop with the token from
// FLASHGATE_ADMIN_TOKEN and prints the not_before; a refusal prints the
// problem's code and fails; no token or no -room is a usage error.
func TestStopWiring(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" || r.Method != http.MethodPost {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.EscapedPath() {
		case "/admin/rooms/sale%20one/stop":
			_, _ = w.Write([]byte(`{"room":"sale one","not_before":1767225601,"paused":true,"state":"paused","edge_max_age_ms":5000,"edge_max_age_s":5}`))
		case "/admin/rooms/old/stop": // a server from before edge_max_age_ms
			_, _ = w.Write([]byte(`{"room":"old","not_before":1767225601,"paused":false,"state":"paused","edge_max_age_s":7}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"code":"unknown_room","detail":"unknown waiting room"}`))
		}
	}))
	defer srv.Close()
	stop := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"stop"}, args...), strings.NewReader(""), &out, &errb)
		return code, out.String(), errb.String()
	}

	t.Setenv("FLASHGATE_ADMIN_TOKEN", "")
	code, _, errs := stop("-room", "r", "-url", srv.URL)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errs, "FLASHGATE_ADMIN_TOKEN")

	t.Setenv("FLASHGATE_ADMIN_TOKEN", "tok")
	code, _, errs = stop("-url", srv.URL)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errs, "-room is required")

	code, out, _ := stop("-room", "sale one", "-url", srv.URL)
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, "room sale one stopped: admissions issued before 2026-01-01T00:00:01Z (not_before 1767225601)")
	assert.Contains(t, out, "now paused")
	assert.Contains(t, out, "within 5s plus one fetch")
	code, out, _ = stop("-room", "old", "-url", srv.URL)
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, "within 7s plus one fetch", "edge_max_age_s when edge_max_age_ms is absent")
	code, out, _ = stop("-room", "sale one", "-url", srv.URL, "-json")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, `"not_before":1767225601`)

	code, _, errs = stop("-room", "other", "-url", srv.URL)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, errs, "404 unknown_room")
}
