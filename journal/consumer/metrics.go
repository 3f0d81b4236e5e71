package consumer

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashgate/flashgate/journal"
)

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
	// Accuracy and fairness (docs/operations.md#metrics; Store.ApplyChecked).
	estimate   *prometheus.HistogramVec // flashgate_estimate_error_seconds{room}
	over       *prometheus.CounterVec   // flashgate_estimate_over_seconds_total{room}
	under      *prometheus.CounterVec   // flashgate_estimate_under_seconds_total{room}
	inversions *prometheus.CounterVec   // flashgate_order_inversions_total{room,lane}
	rateOver   *prometheus.CounterVec   // flashgate_rate_overshoot_total{room}
	capOver    *prometheus.CounterVec   // flashgate_capacity_overshoot_total{room}
	skipped    *prometheus.CounterVec   // flashgate_journal_limit_checks_skipped_total{room}
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
			Help: "Journal events rejected as invalid (logged, acked, not written; an event of a batch entry alone), by room.",
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
			Help:    "Time to write one batch (one room, the events of at most 1000 stream entries) to PostgreSQL, successful batches.",
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
		estimate: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "flashgate_estimate_error_seconds",
			Help: "|shown − real| of each admitted entry that was shown an estimate on entering: the estimated wait of its enter reply against its wait, enter → admitted (room clock); observed with flashgate_wait_seconds.",
			// 100 ms … 1 h
			Buckets: []float64{0.1, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600},
		}, []string{"room"}),
		over: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_estimate_over_seconds_total",
			Help: "Sum of shown − real over the entries whose estimate was too long (the positive part of the signed error); bias = (over − under) / flashgate_estimate_error_seconds_count.",
		}, []string{"room"}),
		under: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_estimate_under_seconds_total",
			Help: "Sum of real − shown over the entries whose estimate was too short (the negative part of the signed error).",
		}, []string{"room"}),
		inversions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_order_inversions_total",
			Help: "Pairs of admissions of one lane admitted out of their line order (arrival; a lottery's drawn pre-queue among itself excepted), found by the journal. Must stay 0.",
		}, []string{"room", "lane"}),
		rateOver: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_rate_overshoot_total",
			Help: "Admissions beyond the room's rate_per_minute in the 60 s up to an admission, found by the journal. Must stay 0.",
		}, []string{"room"}),
		capOver: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_capacity_overshoot_total",
			Help: "Live admissions beyond the room's capacity at an admission, found by the journal. Must stay 0.",
		}, []string{"room"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_journal_limit_checks_skipped_total",
			Help: "Batches that found an overshoot while an earlier journal entry was still pending on another journal process, so the finding was dropped (it may be wrong).",
		}, []string{"room"}),
	}
	if reg != nil {
		reg.MustRegister(m.events, m.rejected, m.lagEvents, m.lagSeconds, m.apply, m.errors, m.wait,
			m.estimate, m.over, m.under, m.inversions, m.rateOver, m.capOver, m.skipped)
	}
	return m
}

// observe records what one applied batch found: the waits (and the error
// of the estimates shown for them), inversions and rate overshoots.
func (m *Metrics) observe(a journal.Applied) {
	for _, w := range a.Waits {
		m.wait.WithLabelValues(w.Room).Observe(w.Wait.Seconds())
		if w.Estimate < 0 {
			continue
		}
		e := (w.Estimate - w.Wait).Seconds()
		m.estimate.WithLabelValues(w.Room).Observe(math.Abs(e))
		if e > 0 {
			m.over.WithLabelValues(w.Room).Add(e)
		} else {
			m.under.WithLabelValues(w.Room).Add(-e)
		}
	}
	for _, f := range a.Inversions {
		m.inversions.WithLabelValues(f.Room, f.Lane).Add(float64(f.Count))
	}
	for _, f := range a.RateOvershoots {
		m.rateOver.WithLabelValues(f.Room).Add(float64(f.Count))
	}
	for _, f := range a.CapacityOvershoots {
		m.capOver.WithLabelValues(f.Room).Add(float64(f.Count))
	}
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
