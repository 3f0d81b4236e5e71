package consumer

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the journal process's Prometheus metrics (docs/operations.md "The
// journal process"). The room label takes the rooms of fg:rooms: a room
// that leaves the set loses its lag series.
type Metrics struct {
	events     *prometheus.CounterVec   // flashgate_journal_events_total{room,kind}
	rejected   *prometheus.CounterVec   // flashgate_journal_rejected_total{room}
	lagEvents  *prometheus.GaugeVec     // flashgate_journal_lag_events{room}
	lagSeconds *prometheus.GaugeVec     // flashgate_journal_lag_seconds{room}
	apply      prometheus.Histogram     // flashgate_journal_apply_seconds
	errors     *prometheus.CounterVec   // flashgate_journal_errors_total{stage}
	wait       *prometheus.HistogramVec // flashgate_wait_seconds{room}
}

// NewMetrics creates the metrics and registers them with reg (nil: not
// registered, for tests and callers without /metrics). It panics if reg
// already holds them (prometheus.MustRegister).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_journal_events_total",
			Help: "Journal events written to PostgreSQL, by room and kind (a redelivered event counts again).",
		}, []string{"room", "kind"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_journal_rejected_total",
			Help: "Journal stream entries rejected as invalid (logged, acked, not written), by room.",
		}, []string{"room"}),
		lagEvents: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashgate_journal_lag_events",
			Help: "Journal stream entries of the room not yet written: undelivered (XINFO GROUPS lag) plus pending.",
		}, []string{"room"}),
		lagSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashgate_journal_lag_seconds",
			Help: "Age of the room's oldest journal stream entry not yet written (pending or undelivered), by its stream id; 0 when caught up.",
		}, []string{"room"}),
		apply: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "flashgate_journal_apply_seconds",
			Help:    "Time to write one batch (one room, at most 1000 events) to PostgreSQL, successful batches.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14), // 1 ms … 8 s
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_journal_errors_total",
			Help: "Failed journal steps by stage: rooms, group, read, apply, ack, trim, lag.",
		}, []string{"stage"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "flashgate_wait_seconds",
			Help: "Wait of an entry from enter to admitted (room clock), observed by the journal when both are written; a redelivered event may observe an entry twice.",
			// 1 s … about 4.5 h
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 16200},
		}, []string{"room"}),
	}
	if reg != nil {
		reg.MustRegister(m.events, m.rejected, m.lagEvents, m.lagSeconds, m.apply, m.errors, m.wait)
	}
	return m
}

func (m *Metrics) setLag(room string, events, seconds float64) {
	m.lagEvents.WithLabelValues(room).Set(events)
	m.lagSeconds.WithLabelValues(room).Set(seconds)
}

// forget drops a room's lag series (it left fg:rooms).
func (m *Metrics) forget(room string) {
	m.lagEvents.DeleteLabelValues(room)
	m.lagSeconds.DeleteLabelValues(room)
}
