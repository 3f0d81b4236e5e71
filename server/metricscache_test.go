package server

import (
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestObserveCachedChildren: observe's cached children feed the same series
// WithLabelValues names (one per route, method and status; one histogram per
// route and method), the cache keeps no alias of the route string it was
// given, and statuses outside 100–599 still count.
func TestObserveCachedChildren(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry(), nil, newEnv(t).is, nil, nil)
	require.NoError(t, err)
	buf := []byte("/v1/rooms/:room/status")
	route := string(buf)
	for i := range 3 {
		m.observe(route, "GET", 200, time.Millisecond)
		m.observe(route, "GET", 503, time.Millisecond)
		if i == 0 {
			m.observe("/v1/rooms/:room/status", "HEAD", 200, time.Millisecond)
			m.observe(route, "GET", 42, time.Millisecond)
		}
	}
	assert.Equal(t, 3.0, testutil.ToFloat64(m.requests.WithLabelValues("/v1/rooms/:room/status", "GET", "200")))
	assert.Equal(t, 3.0, testutil.ToFloat64(m.requests.WithLabelValues("/v1/rooms/:room/status", "GET", "503")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.requests.WithLabelValues("/v1/rooms/:room/status", "HEAD", "200")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.requests.WithLabelValues("/v1/rooms/:room/status", "GET", "42")))
	assert.EqualValues(t, 7, sampleCount(t, m.latency.WithLabelValues("/v1/rooms/:room/status", "GET").(prometheus.Metric)))
	assert.Equal(t, 4, testutil.CollectAndCount(m.requests), "one series per route, method and status")

	rm := m.route("/v1/rooms/:room/status", "GET")
	assert.NotSame(t, unsafeData(route), unsafeData(rm.key.route), "the cache keeps a copy of the route")
	assert.Same(t, rm, m.route(route, "GET"), "one cached entry per route and method")
}

// unsafeData is the address of s's first byte.
func unsafeData(s string) *byte { return unsafe.StringData(s) }
