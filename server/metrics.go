package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
)

// maxRoomsScraped bounds the per-room series (and Redis calls) of one scrape.
// Rooms are bounded anyway: operators create the manual ones, and
// FLASHGATE_MAX_AUTO_ROOMS (default 100) bounds the auto rooms, so the room
// label has at most that many values.
const maxRoomsScraped = 1000

// ExporterLease is how long a replica keeps exporting a room's series after
// its last scrape (issuer.ClaimExporter): another replica takes the room over
// only once it lapses. Prometheus must scrape every replica more often than
// this (its default interval is 1 min, typical 15 s).
const ExporterLease = 2 * time.Minute

type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	sseOpen  prometheus.Gauge
	// sseLimits counts event streams the stream limits ended or refused, by
	// reason (sseReplaced, sseAddressLimit).
	sseLimits   *prometheus.CounterVec
	storeErrors *prometheus.CounterVec
	scripts     *scriptMetrics
	ticks       *tickMetrics
	rooms       *roomCollector
	// mintedChecks and signatureChecks count /v1/complete's admission
	// tokens by how they were authenticated (Server.completeToken).
	mintedChecks, signatureChecks prometheus.Counter
	handler                       fiber.Handler
	http                          http.Handler // what handler adapts
	// routes caches each route's children of requests and latency
	// (routeKey → *routeMetrics), so a request costs neither label hashing
	// nor the vectors' locked lookups (observe).
	routes sync.Map
}

// routeKey names a route's series: its template (or "unmatched") and the
// method label (methodLabel's constant). Neither aliases a request buffer:
// templates are the registered routes' strings, and routeMetrics clones the
// route anyway before keeping it.
type routeKey struct{ route, method string }

// routeMetrics holds one route and method's latency observer and its
// request counters by status (100–599), each resolved on first use: the
// series appear when first observed, as with WithLabelValues per request.
type routeMetrics struct {
	requests *prometheus.CounterVec
	key      routeKey
	latency  prometheus.Observer
	byStatus [500]atomic.Pointer[prometheus.Counter]
}

// counter returns the requests counter of status.
func (rm *routeMetrics) counter(status int) prometheus.Counter {
	if status < 100 || status > 599 {
		return rm.requests.WithLabelValues(rm.key.route, rm.key.method, strconv.Itoa(status))
	}
	slot := &rm.byStatus[status-100]
	if c := slot.Load(); c != nil {
		return *c
	}
	c := rm.requests.WithLabelValues(rm.key.route, rm.key.method, strconv.Itoa(status))
	slot.Store(&c) // a racing store holds the same child: WithLabelValues returns one per labels
	return c
}

// route returns the cached children of route and method (a methodLabel constant).
func (m *metrics) route(route, method string) *routeMetrics {
	if v, ok := m.routes.Load(routeKey{route, method}); ok {
		return v.(*routeMetrics)
	}
	k := routeKey{strings.Clone(route), method}
	rm := &routeMetrics{requests: m.requests, key: k, latency: m.latency.WithLabelValues(k.route, k.method)}
	v, _ := m.routes.LoadOrStore(k, rm)
	return v.(*routeMetrics)
}

func newMetrics(reg prometheus.Registerer, gat prometheus.Gatherer, is Issuer, health RedisHealth,
	pool func() *redis.PoolStats, extra ...prometheus.Collector) (*metrics, error) {
	if reg == nil {
		r := prometheus.NewRegistry()
		r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		reg, gat = r, r
	}
	if gat == nil {
		if g, ok := reg.(prometheus.Gatherer); ok {
			gat = g
		} else {
			gat = prometheus.DefaultGatherer
		}
	}
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_http_requests_total",
			Help: "HTTP requests by route template, method and status.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flashgate_http_request_duration_seconds",
			Help:    "HTTP request latency by route template and method (event streams: until the stream starts).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route", "method"}),
		sseOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flashgate_sse_streams_open",
			Help: "Open server-sent event streams.",
		}),
		sseLimits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_sse_streams_limited_total",
			Help: "Event streams ended or refused by the stream limits, by reason: replaced (a newer stream of the same " +
				"room and user ended it, FLASHGATE_STREAMS_PER_USER), address_limit (refused 429, FLASHGATE_STREAMS_PER_ADDRESS), " +
				"replica_limit (refused 429, the replica's FLASHGATE_MAX_STREAMS).",
		}, []string{"reason"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_store_errors_total",
			Help: "Requests and event-stream polls refused because of the queue store, by problem code: " +
				"unavailable (Redis unreachable or failing), store_full (Redis over maxmemory). Not logged one by one.",
		}, []string{"code"}),
	}
	// Both series exist from the start, so rate() sees the first refusal.
	m.storeErrors.WithLabelValues(string(flashgate.CodeUnavailable))
	m.storeErrors.WithLabelValues(string(flashgate.CodeStoreFull))
	m.scripts, m.ticks = newScriptMetrics(), newTickMetrics()
	rc := newRoomCollector(is)
	m.rooms = rc
	obs := newObservationCollector(is)
	checks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flashgate_complete_token_checks_total",
		Help: "Admission tokens /v1/complete authenticated, by check: minted (byte for byte a token this issuer minted, " +
			"by its note in Redis: no Ed25519 arithmetic) or signature (Ed25519: tokens minted before their note landed, " +
			"by a replica that does not note, and every forged one).",
	}, []string{"check"})
	m.mintedChecks, m.signatureChecks = checks.WithLabelValues("minted"), checks.WithLabelValues("signature")
	for _, r := range []string{sseReplaced, sseAddressLimit, sseReplicaLimit} {
		m.sseLimits.WithLabelValues(r) // every series from the start
	}
	cs := []prometheus.Collector{m.requests, m.latency, m.sseOpen, m.sseLimits, m.storeErrors, rc, rc.errors, rc.exported,
		obs, checks, m.scripts.dur, m.scripts.errs, m.ticks.dur, m.ticks.failures}
	cs = append(cs, extra...)
	if pool != nil {
		cs = append(cs, poolCollectors(pool)...)
	}
	if health != nil {
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flashgate_redis_up",
			Help: "1 while Redis answers; 0 while the connection's breaker is open (Redis known down: commands fail fast).",
		}, func() float64 {
			if health.Up() {
				return 1
			}
			return 0
		}), prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "flashgate_redis_failures_total",
			Help: "Connection-level Redis failures (refused, reset, EOF, timeout); consecutive ones open the breaker.",
		}, func() float64 { return float64(health.Failures()) }), prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "flashgate_redis_rejected_total",
			Help: "Redis commands failed fast, without being sent, while the breaker was open.",
		}, func() float64 { return float64(health.Rejected()) }))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.http = promhttp.HandlerFor(gat, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	m.handler = adaptor.HTTPHandler(m.http)
	return m, nil
}

// Reasons of flashgate_sse_streams_limited_total.
const (
	sseReplaced     = "replaced"
	sseAddressLimit = "address_limit"
	sseReplicaLimit = "replica_limit"
)

// sseLimited counts an event stream the stream limits ended or refused.
func (m *metrics) sseLimited(reason string) { m.sseLimits.WithLabelValues(reason).Inc() }

// storeError counts a refusal because of the queue store (code unavailable
// or store_full); other codes are not counted here.
func (m *metrics) storeError(code string) {
	if code == string(flashgate.CodeUnavailable) || code == string(flashgate.CodeStoreFull) {
		m.storeErrors.WithLabelValues(code).Inc()
	}
}

// observe counts a request of route (template or "unmatched") and method
// (a methodLabel constant: fiber's method string aliases a reused buffer,
// never keep it as a label) answered with status after d, through the
// route's cached children (metrics.route).
func (m *metrics) observe(route, method string, status int, d time.Duration) {
	rm := m.route(route, method)
	rm.counter(status).Inc()
	rm.latency.Observe(d.Seconds())
}

// observationCollector exports the issuer's own counters (this replica's,
// since it started) from one issuer.Observation per scrape, so the series
// of one scrape come from one reading.
type observationCollector struct {
	is Observed

	enterCalls, enterUsers, batchCalls, batchItems, notesLost, restored *prometheus.Desc
}

func newObservationCollector(is Observed) *observationCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &observationCollector{is: is,
		enterCalls: d("flashgate_enter_script_calls_total",
			"Enter script calls this replica sent; concurrent enters for a room share one call."),
		enterUsers: d("flashgate_enter_script_users_total",
			"Users those enter script calls carried (divided by the calls: the mean batch size)."),
		batchCalls: d("flashgate_script_batch_calls_total",
			"Coalesced script calls this replica sent, by operation (enter, status, exchange, complete; a status call carrying exchanges counts under both).", "op"),
		batchItems: d("flashgate_script_batch_items_total",
			"Items (users, tokens, admissions) those calls carried, by operation; divided by the calls: the mean batch.", "op"),
		notesLost: d("flashgate_minted_notes_lost_total",
			"Notes of minted admission tokens that did not reach Redis (their completions check the signature instead)."),
		restored: d("flashgate_rooms_restored_total",
			"Rooms this replica recreated from their last known config after Redis lost them (each also logged at WARN)."),
	}
}

func (oc *observationCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{oc.enterCalls, oc.enterUsers, oc.batchCalls, oc.batchItems, oc.notesLost, oc.restored} {
		ch <- d
	}
}

func (oc *observationCollector) Collect(ch chan<- prometheus.Metric) {
	o := oc.is.Observe()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(oc.enterCalls, o.Batches.Enter.Calls)
	counter(oc.enterUsers, o.Batches.Enter.Items)
	for _, op := range []struct {
		name string
		s    issuer.BatchStats
	}{{"enter", o.Batches.Enter}, {"status", o.Batches.Status}, {"exchange", o.Batches.Exchange}, {"complete", o.Batches.Complete}} {
		counter(oc.batchCalls, op.s.Calls, op.name)
		counter(oc.batchItems, op.s.Items, op.name)
	}
	counter(oc.notesLost, o.MintedNotesLost)
	counter(oc.restored, o.RoomsRestored)
}

// roomCollector reads issuer.Stats for the rooms whose exporter lease this
// replica holds (issuer.ClaimExporter, renewed at each scrape): the room
// series are read from Redis and are the same on every replica, so exactly
// one replica at a time exports each room and sum() across replicas counts
// each room once (docs/operations.md#observability). max by (room) is also right.
type roomCollector struct {
	is Issuer
	// replica names this process in the leases (random, per process).
	replica string
	// lease is ExporterLease (tests shorten nothing: they delete the key).
	lease time.Duration

	open, waiting, live, capacity, entered, admitted, expired, revoked, left, completed *prometheus.Desc

	errors   prometheus.Counter
	exported prometheus.Gauge
}

func newRoomCollector(is Issuer) *roomCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"room"}, nil)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	const once = " Exported by one replica at a time (the room's exporter lease): sum() across replicas counts the room once."
	return &roomCollector{is: is, replica: hex.EncodeToString(id[:]), lease: ExporterLease,
		open:      d("flashgate_room_open", "1 while the room's state in effect is open (admitting), 0 while paused or closed (the event window applied)."+once),
		waiting:   d("flashgate_room_waiting", "Entries waiting in the room, both lanes."+once),
		live:      d("flashgate_room_live", "Live admissions in the room."+once),
		capacity:  d("flashgate_room_capacity", "The room's total active users (capacity)."+once),
		entered:   d("flashgate_room_entered_total", "Entries created in the room since it was created (repeated enters do not count)."+once),
		admitted:  d("flashgate_room_admitted_total", "Admissions in the room since it was created."+once),
		expired:   d("flashgate_room_expired_total", "Admissions that expired (session over, or not claimed within the arrival window)."+once),
		revoked:   d("flashgate_room_revoked_total", "Admissions revoked by the admin API."+once),
		left:      d("flashgate_room_left_total", "Entries and admissions their user left."+once),
		completed: d("flashgate_room_completed_total", "Completed admissions in the room since it was created."+once),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashgate_room_scrape_errors_total",
			Help: "Failures reading room stats for /metrics.",
		}),
		exported: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flashgate_rooms_exported",
			Help: "Rooms whose series this replica exported at its last scrape (it holds their exporter lease); summed across replicas: the rooms.",
		}),
	}
}

func (rc *roomCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{rc.open, rc.waiting, rc.live, rc.capacity, rc.entered, rc.admitted, rc.expired, rc.revoked, rc.left, rc.completed} {
		ch <- d
	}
}

func (rc *roomCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rooms, err := rc.is.Rooms(ctx)
	if err != nil {
		rc.errors.Inc()
		return
	}
	if len(rooms) > maxRoomsScraped {
		rooms = rooms[:maxRoomsScraped]
	}
	exported := 0
	defer func() { rc.exported.Set(float64(exported)) }()
	for _, room := range rooms {
		mine, err := rc.is.ClaimExporter(ctx, room, rc.replica, rc.lease)
		if err != nil {
			rc.errors.Inc()
			continue
		}
		if !mine {
			continue
		}
		st, err := rc.is.Stats(ctx, room)
		if err != nil {
			if !errors.Is(err, flashgate.ErrUnknownRoom) {
				rc.errors.Inc()
			}
			continue
		}
		exported++
		gauge := func(d *prometheus.Desc, v int64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), room)
		}
		counter := func(d *prometheus.Desc, v int64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), room)
		}
		open := int64(0)
		if st.State == issuer.RoomOpen {
			open = 1
		}
		gauge(rc.open, open)
		gauge(rc.waiting, st.Waiting)
		gauge(rc.live, st.Active)
		gauge(rc.capacity, int64(st.Config.Capacity))
		counter(rc.entered, st.Entered)
		counter(rc.admitted, st.Admitted)
		counter(rc.expired, st.Expired)
		counter(rc.revoked, st.Revoked)
		counter(rc.left, st.Left)
		counter(rc.completed, st.Completed)
	}
}

func methodLabel(m string) string {
	for _, k := range [...]string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE"} {
		if m == k {
			return k
		}
	}
	return "OTHER"
}

// poolCollectors export the go-redis connection pool's stats (Options.RedisPool).
func poolCollectors(pool func() *redis.PoolStats) []prometheus.Collector {
	conns := func(state string, get func(*redis.PoolStats) uint32) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "flashgate_redis_pool_connections",
			Help:        "Connections in the go-redis pool, by state: total (open) and idle.",
			ConstLabels: prometheus.Labels{"state": state},
		}, func() float64 { return float64(get(pool())) })
	}
	counter := func(name, help string, get func(*redis.PoolStats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return get(pool()) })
	}
	return []prometheus.Collector{
		conns("total", func(p *redis.PoolStats) uint32 { return p.TotalConns }),
		conns("idle", func(p *redis.PoolStats) uint32 { return p.IdleConns }),
		counter("flashgate_redis_pool_misses_total", "Commands that found no idle connection in the go-redis pool (a connection was dialed or waited for).",
			func(p *redis.PoolStats) float64 { return float64(p.Misses) }),
		counter("flashgate_redis_pool_waits_total", "Commands that waited for a go-redis pool connection (the pool was at pool_size).",
			func(p *redis.PoolStats) float64 { return float64(p.WaitCount) }),
		counter("flashgate_redis_pool_wait_seconds_total", "Time commands spent waiting for a go-redis pool connection, in all.",
			func(p *redis.PoolStats) float64 { return float64(p.WaitDurationNs) / 1e9 }),
		counter("flashgate_redis_pool_timeouts_total", "Waits for a go-redis pool connection that gave up (pool_timeout): raise pool_size.",
			func(p *redis.PoolStats) float64 { return float64(p.Timeouts) }),
	}
}

// streamLimitGauge exports Options.MaxStreams (0: no limit), so that a
// dashboard or an autoscaler compares flashgate_sse_streams_open with it.
func streamLimitGauge(limit int) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "flashgate_sse_streams_limit",
		Help: "The most event streams this replica holds open (FLASHGATE_MAX_STREAMS; 0: no limit); more are refused 429 and the waiting page polls.",
	}, func() float64 { return float64(limit) })
}

// keyCollector exports the creation time of the ring's active and next
// signing keys, read at each scrape (a FileRing reloads its file). The next
// key is created by a rotation, so time() minus its timestamp is the time
// since the last rotation; the active key was created one rotation before
// it became active.
type keyCollector struct {
	ring interface{ Keys() []keys.KeyInfo }
	desc *prometheus.Desc
}

func newKeyCollector(ring interface{ Keys() []keys.KeyInfo }) *keyCollector {
	return &keyCollector{ring: ring, desc: prometheus.NewDesc("flashgate_signing_key_created_timestamp_seconds",
		"Creation time (Unix seconds) of the key ring's active and next signing keys, by status; "+
			"a rotation activates the next key and creates a new next key (docs/keys.md).", []string{"status"}, nil)}
}

func (c *keyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *keyCollector) Collect(ch chan<- prometheus.Metric) {
	for _, k := range c.ring.Keys() {
		if k.Status == keys.StatusActive || k.Status == keys.StatusNext {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(k.Created.Unix()), string(k.Status))
		}
	}
}
