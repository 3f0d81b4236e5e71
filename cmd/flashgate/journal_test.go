package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/pgtest"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/journal/consumer"
)

// TestJournalHelpAndUsage: `journal run -h` prints the environment table on
// stdout and exits 0; a missing subcommand or an unknown one is a usage
// error; a missing required variable is named.
func TestJournalHelpAndUsage(t *testing.T) {
	r := runCLI(t, "", "journal", "run", "-h")
	assert.Equal(t, exitOK, r.code)
	assert.Empty(t, r.stderr)
	for _, v := range []string{"Usage: flashgate journal run", "REDIS_URL", "FLASHGATE_JOURNAL_DSN",
		"FLASHGATE_JOURNAL_LISTEN", "127.0.0.1:9091", "FLASHGATE_JOURNAL_MAX_LAG", "30s", "FLASHGATE_JOURNAL_CONSUMER"} {
		assert.Contains(t, r.stdout, v)
	}
	r = runCLI(t, "", "journal", "-h")
	assert.Equal(t, exitOK, r.code)
	for _, sub := range []string{"run", "show", "report"} {
		assert.Contains(t, r.stdout, sub)
	}
	for _, args := range [][]string{{"journal"}, {"journal", "frobnicate"}} {
		r := runCLI(t, "", args...)
		assert.Equal(t, exitUsage, r.code, "%v", args)
		assert.Contains(t, r.stderr, "Usage: flashgate journal", "%v", args)
		assert.Empty(t, r.stdout, "%v", args)
	}
	assert.Contains(t, runCLI(t, "", "journal", "frobnicate").stderr, `unknown command "frobnicate"`)
	assert.Contains(t, runCLI(t, "", "-h").stdout, "flashgate journal run")

	_, err := loadJournalEnv(map[string]string{"REDIS_URL": "redis://x"})
	require.ErrorContains(t, err, "FLASHGATE_JOURNAL_DSN")
	_, err = loadJournalEnv(map[string]string{"REDIS_URL": "redis://x", "FLASHGATE_JOURNAL_DSN": "postgres://x",
		"FLASHGATE_JOURNAL_MAX_LAG": "soon"})
	require.ErrorContains(t, err, "FLASHGATE_JOURNAL_MAX_LAG: not a valid duration")
	c, err := loadJournalEnv(map[string]string{"REDIS_URL": "redis://x", "FLASHGATE_JOURNAL_DSN": "postgres://x"})
	require.NoError(t, err)
	assert.Equal(t, journalConfig{DSN: "postgres://x", Listen: "127.0.0.1:9091", MaxLag: 30 * time.Second,
		Batch: 1000, LogLevel: "info", LogFormat: "json"}, c.Journal)
}

// TestJournalRun: the process migrates the schema, writes a room's stream
// to PostgreSQL, serves /metrics, /healthz and /readyz, logs JSON, and stops
// on cancel (SIGTERM).
func TestJournalRun(t *testing.T) {
	rs := redistest.Start(t)
	pg := pgtest.Start(t)
	dsn := pg.NewDatabase(t)
	port := redistest.FreePort(t)
	t.Setenv("REDIS_URL", "redis://"+rs.Addr+"/0")
	t.Setenv("FLASHGATE_JOURNAL_DSN", dsn)
	t.Setenv("FLASHGATE_JOURNAL_LISTEN", fmt.Sprintf("127.0.0.1:%d", port))
	t.Setenv("FLASHGATE_JOURNAL_CONSUMER", "test-1")

	rdb := rs.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, rdb.SAdd(ctx, consumer.RoomsKey, "sku-1").Err())
	require.NoError(t, rdb.XAdd(ctx, &redis.XAddArgs{Stream: consumer.StreamKey("sku-1"), Values: []any{
		"kind", "entered", "epoch", "ab12cd34ef", "seq", "1", "user", "alice", "lane", "public", "at", "1000",
		"admission", "", "reason", ""}}).Err())

	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"journal", "run"}, strings.NewReader(""), &stdout, &stderr) }()

	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	require.Eventually(t, func() bool {
		code, body := get("/metrics")
		return code == http.StatusOK && strings.Contains(body, `flashgate_journal_events_total{kind="entered",room="sku-1"} 1`)
	}, time.Minute, 20*time.Millisecond, "the entry was never journaled: %s", stderr.String())
	code, body := get("/healthz")
	assert.Equal(t, http.StatusOK, code, body)
	require.Eventually(t, func() bool { code, _ := get("/readyz"); return code == http.StatusOK },
		time.Minute, 20*time.Millisecond)

	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	var user string
	require.NoError(t, conn.QueryRow(ctx, `SELECT user_id FROM journal_entries WHERE room = 'sku-1' AND arrival = 1`).Scan(&user))
	conn.Close(ctx)
	assert.Equal(t, "alice", user)

	rs.Kill() // Redis down: not ready, with a reason
	code, body = get("/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	var why struct {
		Ready  bool
		Reason string
	}
	require.NoError(t, json.Unmarshal([]byte(body), &why), body)
	assert.Contains(t, why.Reason, "redis unreachable")

	cancel()
	assert.Equal(t, exitOK, <-done, stderr.String())
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var v map[string]any
		assert.NoError(t, json.Unmarshal([]byte(line), &v), "not a JSON log line: %q", line)
	}
	assert.Contains(t, stderr.String(), "shutdown: consumer stopped")
}
