package server

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
)

// scrape returns e's /metrics body.
func (e *env) scrape() string {
	e.t.Helper()
	r := e.do(req{method: "GET", path: "/metrics"})
	require.Equal(e.t, 200, r.status)
	return string(r.body)
}

// seriesLines returns the lines of body that are samples of name{room="room"}.
func seriesLines(body, name, room string) []string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, name+`{room="`+room+`"} `) {
			out = append(out, l)
		}
	}
	return out
}

// TestRoomSeriesExportedOnce: two replicas on one Redis export a room's
// series from one of them only (its exporter lease), so sum() across
// replicas is the room's figure; when the lease lapses (the holder stopped
// being scraped: here its key is deleted) the other takes the room over,
// and the former holder then stays silent.
func TestRoomSeriesExportedOnce(t *testing.T) {
	rdb := redistest.Client(t)
	a, b := newEnv(t, withRedis(rdb)), newEnv(t, withRedis(rdb))
	room := a.room(issuer.RoomConfig{Capacity: 1})
	for _, u := range []string{"u1", "u2", "u3"} {
		a.enter(room, u)
	}
	b.do(req{method: "POST", path: "/admin/rooms/" + room + "/revoke", bearer: adminToken, body: `{"user":"u1"}`})

	sa, sb := a.scrape(), b.scrape()
	for name, want := range map[string]string{
		"flashgate_room_open": "1", "flashgate_room_waiting": "2", "flashgate_room_live": "0", "flashgate_room_entered_total": "3",
		"flashgate_room_admitted_total": "1", "flashgate_room_revoked_total": "1", "flashgate_room_left_total": "0",
		"flashgate_room_expired_total": "0", "flashgate_room_completed_total": "0", "flashgate_room_capacity": "1",
	} {
		require.Len(t, seriesLines(sa, name, room), 1, "the first replica scraped takes the lease: %s", name)
		assert.Equal(t, name+`{room="`+room+`"} `+want, seriesLines(sa, name, room)[0])
		assert.Empty(t, seriesLines(sb, name, room), "the other replica exports nothing of the room: %s", name)
	}
	// Renewed by its holder: a scrape again, then b again, changes nothing.
	assert.Len(t, seriesLines(a.scrape(), "flashgate_room_waiting", room), 1)
	assert.Empty(t, seriesLines(b.scrape(), "flashgate_room_waiting", room))

	require.NoError(t, rdb.Del(context.Background(), "fg:{"+room+"}:exporter").Err()) // a's lease lapsed
	assert.Len(t, seriesLines(b.scrape(), "flashgate_room_waiting", room), 1)
	assert.Empty(t, seriesLines(a.scrape(), "flashgate_room_waiting", room))
}

// TestScriptAndTickMetrics: the Redis hook times each script call by name
// (an EVAL after a SCRIPT FLUSH too, once), counts Redis-level failures by
// script; the tick observer times ticks and counts failed ones by code.
func TestScriptAndTickMetrics(t *testing.T) {
	rs := redistest.Start(t)
	rdb := rs.Client(t)
	e := newEnv(t, withRedis(rdb))
	rdb.AddHook(e.srv.RedisHook())
	sm := e.srv.m.scripts
	room := e.room(issuer.RoomConfig{Capacity: 1})
	hist := func(script string) uint64 {
		return sampleCount(t, sm.dur.WithLabelValues(script).(prometheus.Metric))
	}
	e.enter(room, "alice")
	assert.EqualValues(t, 1, hist("enter"))
	require.NoError(t, rdb.ScriptFlush(context.Background()).Err())
	e.enter(room, "bob")
	assert.EqualValues(t, 2, hist("enter"), "NOSCRIPT then EVAL: one call timed")
	assert.Zero(t, testutil.ToFloat64(sm.errs.WithLabelValues("enter")))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.is.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	tm := e.srv.m.ticks
	require.Eventually(t, func() bool { return sampleCount(t, tm.dur) > 0 },
		10*time.Second, 10*time.Millisecond, "no tick observed")
	assert.Positive(t, hist("tick"))

	rs.Kill()
	require.Eventually(t, func() bool { return testutil.ToFloat64(tm.failures.WithLabelValues("unavailable")) > 0 },
		10*time.Second, 10*time.Millisecond, "no failed tick counted")
	assert.Positive(t, testutil.ToFloat64(sm.errs.WithLabelValues("tick")))
}

// sampleCount is a histogram's observation count.
func sampleCount(t *testing.T, h prometheus.Metric) uint64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, h.Write(&m))
	return m.GetHistogram().GetSampleCount()
}

func TestRedisPoolMetrics(t *testing.T) {
	stats := &redis.PoolStats{TotalConns: 3, IdleConns: 2, Misses: 4, WaitCount: 5, WaitDurationNs: 1_500_000_000, Timeouts: 1}
	e := newEnv(t, withOptions(func(o *Options) { o.RedisPool = func() *redis.PoolStats { return stats } }))
	r := e.do(req{method: "GET", path: "/metrics"})
	require.Equal(t, 200, r.status)
	for _, want := range []string{
		`flashgate_redis_pool_connections{state="total"} 3`,
		`flashgate_redis_pool_connections{state="idle"} 2`,
		`flashgate_redis_pool_misses_total 4`,
		`flashgate_redis_pool_waits_total 5`,
		`flashgate_redis_pool_wait_seconds_total 1.5`,
		`flashgate_redis_pool_timeouts_total 1`,
	} {
		assert.Contains(t, string(r.body), want)
	}
	// Without Options.RedisPool the series are absent.
	r = newEnv(t).do(req{method: "GET", path: "/metrics"})
	assert.NotContains(t, string(r.body), "flashgate_redis_pool_")
}

// TestNoMetricsRoute: Options.NoMetricsRoute takes /metrics off the app,
// and MetricsHandler serves what it served.
func TestNoMetricsRoute(t *testing.T) {
	on := newEnv(t)
	require.Equal(t, 200, on.do(req{method: "GET", path: "/metrics"}).status)
	e := newEnv(t, withOptions(func(o *Options) { o.NoMetricsRoute = true }))
	e.do(req{method: "GET", path: "/metrics"}).problem(t, 404, "unknown_route")
	rec := httptest.NewRecorder()
	e.srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Equal(t, 200, rec.Code)
	require.Contains(t, rec.Body.String(), "flashgate_sse_streams_limited_total{reason=\"replaced\"} 0")
}

// observedOnce is an Issuer whose Observe returns a fixed Observation
// (a distinct number per field) and counts its calls.
type observedOnce struct {
	Issuer
	calls atomic.Int64
}

func (o *observedOnce) Observe() issuer.Observation {
	o.calls.Add(1)
	return issuer.Observation{
		Batches: issuer.ScriptBatchStats{Enter: issuer.BatchStats{Calls: 1, Items: 2}, Status: issuer.BatchStats{Calls: 3, Items: 4},
			Exchange: issuer.BatchStats{Calls: 5, Items: 6}, Complete: issuer.BatchStats{Calls: 7, Items: 8}},
		MintedNotesLost: 9, RoomsRestored: 10, TickCalls: 11,
	}
}

// /metrics exports the issuer's own counters from one Observe per scrape,
// each field as its series.
func TestMetricsReadOneObservation(t *testing.T) {
	var obs *observedOnce
	e := newEnv(t, withOptions(func(o *Options) { obs = &observedOnce{Issuer: o.Issuer}; o.Issuer = obs }))
	r := e.do(req{method: "GET", path: "/metrics"})
	require.Equal(t, 200, r.status)
	assert.Equal(t, int64(1), obs.calls.Load(), "one Observe per scrape")
	for _, want := range []string{
		"flashgate_enter_script_calls_total 1\n",
		"flashgate_enter_script_users_total 2\n",
		`flashgate_script_batch_calls_total{op="enter"} 1` + "\n",
		`flashgate_script_batch_items_total{op="enter"} 2` + "\n",
		`flashgate_script_batch_calls_total{op="status"} 3` + "\n",
		`flashgate_script_batch_items_total{op="status"} 4` + "\n",
		`flashgate_script_batch_calls_total{op="exchange"} 5` + "\n",
		`flashgate_script_batch_items_total{op="exchange"} 6` + "\n",
		`flashgate_script_batch_calls_total{op="complete"} 7` + "\n",
		`flashgate_script_batch_items_total{op="complete"} 8` + "\n",
		"flashgate_minted_notes_lost_total 9\n",
		"flashgate_rooms_restored_total 10\n",
	} {
		assert.Contains(t, string(r.body), want)
	}
}
