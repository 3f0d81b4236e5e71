package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/issuer"
)

// jsonLog is a JSON slog logger whose lines a test reads back.
type jsonLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *jsonLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// records returns the logged records whose msg is msg, decoded.
func (l *jsonLog) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func (l *jsonLog) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.buf.String() }

// TestAccessLog: one "request" line per request with the route template,
// room, status, duration and request id, and neither the waiting token
// (query string or header), the user id nor the raw path.
func TestAccessLog(t *testing.T) {
	var l jsonLog
	e := newEnv(t, withOptions(func(o *Options) {
		o.Logger, o.AccessLog = slog.New(slog.NewJSONHandler(&l, nil)), true
	}))
	room := e.room(issuer.RoomConfig{State: issuer.RoomOpen, Capacity: 1, RatePerMinute: 60})
	tok := e.enter(room, "alice-the-user")["waiting_token"].(string)
	r := e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status?waiting_token=" + tok, user: "alice-the-user",
		hdr: map[string]string{"X-Request-ID": "req-42", "X-Waiting-Token": tok}})
	require.Equal(t, 200, r.status, "%s", r.body)
	e.do(req{method: "GET", path: "/no/such/" + room})

	recs := l.records(t, "request")
	require.Len(t, recs, 3, l.String())
	assert.Equal(t, "POST", recs[0]["method"])
	assert.Equal(t, "/v1/rooms/:room/enter", recs[0]["route"])
	assert.Equal(t, room, recs[0]["room"])
	assert.EqualValues(t, 200, recs[0]["status"])
	assert.Contains(t, recs[0], "duration_ms")
	assert.NotContains(t, recs[0], "request_id")
	assert.Equal(t, "/v1/rooms/:room/status", recs[1]["route"])
	assert.Equal(t, "req-42", recs[1]["request_id"])
	assert.Equal(t, "unmatched", recs[2]["route"])
	assert.EqualValues(t, 404, recs[2]["status"])
	assert.Equal(t, "", recs[2]["room"])
	out := l.String()
	assert.NotContains(t, out, tok)
	assert.NotContains(t, out, "alice-the-user")
	assert.NotContains(t, out, "/no/such")
}

// TestAccessLogOff: Options.AccessLog false writes no request lines.
func TestAccessLogOff(t *testing.T) {
	var l jsonLog
	e := newEnv(t, withOptions(func(o *Options) { o.Logger = slog.New(slog.NewJSONHandler(&l, nil)) }))
	room := e.room(issuer.RoomConfig{State: issuer.RoomOpen})
	e.enter(room, "bob")
	assert.Empty(t, l.records(t, "request"))
}

// TestAdminAudit: admin changes are audit-logged with the remote address,
// the token's fingerprint (never the token), route, room, body fields and
// outcome — refused ones too; admin reads are not.
func TestAdminAudit(t *testing.T) {
	var l jsonLog
	e := newEnv(t, withOptions(func(o *Options) { o.Logger = slog.New(slog.NewJSONHandler(&l, nil)) }))
	room := e.room(issuer.RoomConfig{State: issuer.RoomOpen})
	r := e.do(req{method: "POST", path: "/admin/rooms/" + room + "/pause", bearer: adminToken})
	require.Equal(t, 200, r.status, "%s", r.body)
	r = e.do(req{method: "POST", path: "/admin/rooms/" + room + "/ban", bearer: adminToken,
		body: `{"user":"mallory","reason":"bot","api_token":"zzz-not-logged"}`})
	require.Equal(t, 400, r.status, "%s", r.body) // unknown member: refused, and audited
	e.do(req{method: "POST", path: "/admin/rooms/" + room + "/open", bearer: "wrong-token"})
	e.do(req{method: "GET", path: "/admin/rooms/" + room, bearer: adminToken})

	recs := l.records(t, "admin audit")
	require.Len(t, recs, 3, l.String())
	assert.Equal(t, "/admin/rooms/:room/pause", recs[0]["route"])
	assert.Equal(t, room, recs[0]["room"])
	assert.Equal(t, "ok", recs[0]["outcome"])
	assert.Equal(t, TokenFingerprint(adminToken), recs[0]["token_fp"])
	assert.NotEmpty(t, recs[0]["remote"])
	assert.Equal(t, "", recs[0]["fields"])
	assert.Equal(t, `{"reason":"bot","user":"mallory"}`, recs[1]["fields"])
	assert.Equal(t, "refused", recs[1]["outcome"])
	assert.Equal(t, "refused", recs[2]["outcome"])
	assert.EqualValues(t, 401, recs[2]["status"])
	assert.Equal(t, TokenFingerprint("wrong-token"), recs[2]["token_fp"])
	assert.NotEqual(t, recs[0]["token_fp"], recs[2]["token_fp"])
	out := l.String()
	assert.NotContains(t, out, adminToken)
	assert.NotContains(t, out, "zzz-not-logged")
	assert.NotContains(t, out, "wrong-token")

	// The successful changes are in the room's journal too (docs/operations.md
	// "Durability"), the refused ones not; a ban route's user is in the detail.
	r = e.do(req{method: "POST", path: "/admin/rooms/" + room + "/ban", bearer: adminToken, body: `{"user":"mallory","reason":"bot","duration_ms":60000}`})
	require.Equal(t, 200, r.status, "%s", r.body)
	r = e.do(req{method: "DELETE", path: "/admin/rooms/" + room + "/ban/mallory", bearer: adminToken})
	require.Equal(t, 204, r.status, "%s", r.body)
	msgs, err := e.rdb.XRange(context.Background(), "fg:{"+room+"}:journal", "-", "+").Result()
	require.NoError(t, err)
	var audits []map[string]any
	for _, m := range msgs {
		if m.Values["kind"] == "audit" {
			audits = append(audits, m.Values)
		}
	}
	require.Len(t, audits, 3, "pause, ban, unban: %v\n%s", audits, l.String())
	assert.Equal(t, "pause", audits[0]["action"])
	assert.Equal(t, "{}", audits[0]["detail"])
	assert.Equal(t, "ban", audits[1]["action"])
	assert.JSONEq(t, `{"duration_ms":60000,"reason":"bot","user":"mallory"}`, audits[1]["detail"].(string))
	assert.Equal(t, "unban", audits[2]["action"])
	assert.JSONEq(t, `{"user":"mallory"}`, audits[2]["detail"].(string))
	assert.Contains(t, audits[0]["actor"], TokenFingerprint(adminToken))
	for _, a := range audits {
		assert.NotContains(t, a["actor"], adminToken)
	}
}

// TestRefusalsLogQuietlyAndShort (issue 23 §6): a refused admission token
// at /v1/complete is logged at DEBUG, not ERROR (only 5xx are errors); an
// unauthenticated admin request's body, and a path's room, are clipped to
// maxLogField bytes in the log lines, so no client writes a 16 KB line.
func TestRefusalsLogQuietlyAndShort(t *testing.T) {
	var l jsonLog
	e := newEnv(t, withOptions(func(o *Options) {
		o.Logger = slog.New(slog.NewJSONHandler(&l, &slog.HandlerOptions{Level: slog.LevelDebug}))
		o.AccessLog = true
	}))
	room := e.room(issuer.RoomConfig{State: issuer.RoomOpen})
	e.do(req{method: "POST", path: "/v1/complete?product=" + room, bearer: "junk.junk.junk"}).problem(t, 401, "invalid_admission_token")
	failed := l.records(t, "request failed")
	require.Len(t, failed, 1, l.String())
	assert.Equal(t, "DEBUG", failed[0]["level"])
	assert.EqualValues(t, 401, failed[0]["status"])

	big := strings.Repeat("A", DefaultBodyLimit-100)
	r := e.do(req{method: "POST", path: "/admin/rooms/" + room + "/ban", bearer: "wrong-token", body: `{"user":"` + big + `"}`})
	require.Equal(t, 401, r.status, "%s", r.body)
	long := strings.Repeat("r", 3000)
	e.do(req{method: "GET", path: "/wait/" + long})
	audit := l.records(t, "admin audit")
	require.Len(t, audit, 1)
	assert.Contains(t, audit[0]["fields"], `{"user":"AAAA`)
	assert.Contains(t, audit[0]["fields"], fmt.Sprintf("…(%d bytes)", len(big)+11))
	for _, line := range strings.Split(strings.TrimSpace(l.String()), "\n") {
		assert.Less(t, len(line), 1024, "a log line: %.200s…", line)
	}
	assert.NotContains(t, l.String(), big[:maxLogField+1])
	assert.NotContains(t, l.String(), long[:maxLogField+1])

	// An authorised change's fields are whole (the admin is trusted; the journal has them too).
	r = e.do(req{method: "POST", path: "/admin/rooms/" + room + "/ban", bearer: adminToken,
		body: `{"user":"` + strings.Repeat("m", 60) + `","duration_ms":60000,"reason":"` + strings.Repeat("b", 200) + `"}`})
	require.Equal(t, 200, r.status, "%s", r.body)
	audit = l.records(t, "admin audit")
	require.Len(t, audit, 2)
	assert.Greater(t, len(audit[1]["fields"].(string)), maxLogField)
	assert.Contains(t, audit[1]["fields"], strings.Repeat("b", 200))
}
