package server

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
)

// maxRoomsScraped bounds the per-room series (and Redis calls) of one scrape.
const maxRoomsScraped = 1000

type metrics struct {
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	sseOpen     prometheus.Gauge
	storeErrors *prometheus.CounterVec
	handler     fiber.Handler
}

func newMetrics(reg prometheus.Registerer, gat prometheus.Gatherer, is *issuer.Issuer, health RedisHealth) (*metrics, error) {
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
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_store_errors_total",
			Help: "Requests and event-stream polls refused because of the queue store, by problem code: " +
				"unavailable (Redis unreachable or failing), store_full (Redis over maxmemory). Not logged one by one.",
		}, []string{"code"}),
	}
	// Both series exist from the start, so rate() sees the first refusal.
	m.storeErrors.WithLabelValues(string(flashgate.CodeUnavailable))
	m.storeErrors.WithLabelValues(string(flashgate.CodeStoreFull))
	rc := newRoomCollector(is)
	batches := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "flashgate_enter_script_calls_total",
		Help: "Enter script calls this replica sent; concurrent enters for a room share one call.",
	}, func() float64 { c, _ := is.EnterBatchStats(); return float64(c) })
	batched := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "flashgate_enter_script_users_total",
		Help: "Users those enter script calls carried (divided by the calls: the mean batch size).",
	}, func() float64 { _, u := is.EnterBatchStats(); return float64(u) })
	restored := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "flashgate_rooms_restored_total",
		Help: "Rooms this replica recreated from their last known config after Redis lost them (each also logged at WARN).",
	}, func() float64 { return float64(is.RoomsRestored()) })
	cs := []prometheus.Collector{m.requests, m.latency, m.sseOpen, m.storeErrors, rc, rc.errors, batches, batched, restored}
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
	m.handler = adaptor.HTTPHandler(promhttp.HandlerFor(gat, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
	}))
	return m, nil
}

// storeError counts a refusal because of the queue store (code unavailable
// or store_full); other codes are not counted here.
func (m *metrics) storeError(code string) {
	if code == string(flashgate.CodeUnavailable) || code == string(flashgate.CodeStoreFull) {
		m.storeErrors.WithLabelValues(code).Inc()
	}
}

func (m *metrics) observe(route, method string, status int, d time.Duration) {
	// fiber's method string aliases a reused buffer: never keep it as a label.
	method = methodLabel(method)
	m.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(route, method).Observe(d.Seconds())
}

// roomCollector reads issuer.Stats for every registered room on each scrape.
type roomCollector struct {
	is                                           *issuer.Issuer
	waiting, live, capacity, admitted, completed *prometheus.Desc
	errors                                       prometheus.Counter
}

func newRoomCollector(is *issuer.Issuer) *roomCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"room"}, nil)
	}
	return &roomCollector{is: is,
		waiting:   d("flashgate_room_waiting", "Entries waiting in the room."),
		live:      d("flashgate_room_live", "Live admissions in the room."),
		capacity:  d("flashgate_room_capacity", "The room's total active users (capacity)."),
		admitted:  d("flashgate_room_admitted_total", "Admissions in the room since it was created."),
		completed: d("flashgate_room_completed_total", "Completed admissions in the room since it was created."),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashgate_room_scrape_errors_total",
			Help: "Failures reading room stats for /metrics.",
		}),
	}
}

func (rc *roomCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- rc.waiting
	ch <- rc.live
	ch <- rc.capacity
	ch <- rc.admitted
	ch <- rc.completed
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
	for _, room := range rooms {
		st, err := rc.is.Stats(ctx, room)
		if err != nil {
			if !errors.Is(err, flashgate.ErrUnknownRoom) {
				rc.errors.Inc()
			}
			continue
		}
		ch <- prometheus.MustNewConstMetric(rc.waiting, prometheus.GaugeValue, float64(st.Waiting), room)
		ch <- prometheus.MustNewConstMetric(rc.live, prometheus.GaugeValue, float64(st.Active), room)
		ch <- prometheus.MustNewConstMetric(rc.capacity, prometheus.GaugeValue, float64(st.Config.Capacity), room)
		ch <- prometheus.MustNewConstMetric(rc.admitted, prometheus.CounterValue, float64(st.Admitted), room)
		ch <- prometheus.MustNewConstMetric(rc.completed, prometheus.CounterValue, float64(st.Completed), room)
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
