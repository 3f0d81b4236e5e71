package server

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
)

// scriptMetrics times the flashgate scripts a Redis client runs (a go-redis
// hook, Server.RedisHook): flashgate_redis_script_duration_seconds{script}
// and flashgate_redis_script_errors_total{script}. script is
// issuer.ScriptName of the EVALSHA's SHA-1 (or of EVAL's source), "other"
// for a script that is not flashgate's: a fixed set of label values.
type scriptMetrics struct {
	dur  *prometheus.HistogramVec
	errs *prometheus.CounterVec
}

func newScriptMetrics() *scriptMetrics {
	m := &scriptMetrics{
		dur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "flashgate_redis_script_duration_seconds",
			Help: "Round trip of one flashgate script call (EVALSHA, or EVAL after NOSCRIPT) as the client sees it, by script " +
				"(issuer/lua file name); a pipelined call (completion with WAIT) counts the whole pipeline. " +
				"Commands the Redis breaker fails fast are not sent and not timed.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"script"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_redis_script_errors_total",
			Help: "Script calls that failed at the Redis level (connection errors, timeouts, OOM, error replies; not NOSCRIPT, " +
				"which go-redis answers with EVAL, and not the scripts' domain refusals), by script.",
		}, []string{"script"}),
	}
	for _, n := range issuer.ScriptNames() {
		m.errs.WithLabelValues(n) // every series from the start, so rate() sees the first error
	}
	return m
}

// scriptOf names the flashgate script cmd runs, "" when cmd is not a script call.
func scriptOf(cmd redis.Cmder) string {
	args := cmd.Args()
	if len(args) < 2 {
		return ""
	}
	var sha string
	switch strings.ToLower(cmd.Name()) {
	case "evalsha", "evalsha_ro":
		sha, _ = args[1].(string)
	case "eval", "eval_ro":
		src, _ := args[1].(string)
		sum := sha1.Sum([]byte(src))
		sha = hex.EncodeToString(sum[:])
	default:
		return ""
	}
	if n := issuer.ScriptName(sha); n != "" {
		return n
	}
	return "other"
}

// observe records one call of cmd that took d and failed with err (nil:
// succeeded; go-redis hands hooks the error before it is set on cmd).
func (m *scriptMetrics) observe(cmd redis.Cmder, d time.Duration, err error) {
	name := scriptOf(cmd)
	if name == "" {
		return
	}
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		return // go-redis runs EVAL next: that call is the one timed
	}
	m.dur.WithLabelValues(name).Observe(d.Seconds())
	if err != nil && !errors.Is(err, redis.Nil) {
		m.errs.WithLabelValues(name).Inc()
	}
}

// DialHook implements redis.Hook.
func (m *scriptMetrics) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook: it times script calls.
func (m *scriptMetrics) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		if err == nil {
			err = cmd.Err()
		}
		m.observe(cmd, time.Since(start), err)
		return err
	}
}

// ProcessPipelineHook implements redis.Hook: each script call of a pipeline
// is observed with the whole pipeline's duration.
func (m *scriptMetrics) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmds)
		d := time.Since(start)
		for _, c := range cmds {
			cerr := c.Err()
			if cerr == nil {
				cerr = err
			}
			m.observe(c, d, cerr)
		}
		return err
	}
}

// tickMetrics is the issuer's TickObserver: flashgate_tick_duration_seconds
// and flashgate_tick_failures_total{code}, of the ticks THIS replica ran
// (every replica ticks every room: sum() counts all the work done).
type tickMetrics struct {
	dur      prometheus.Histogram
	failures *prometheus.CounterVec
}

func newTickMetrics() *tickMetrics {
	t := &tickMetrics{
		dur: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "flashgate_tick_duration_seconds",
			Help:    "One admission step of one room by this replica's tick loop (every script call of the step), failed ones included.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashgate_tick_failures_total",
			Help: "Ticks of this replica's tick loop that failed, by problem code (unavailable, store_full, internal, …; " +
				"a room found gone is not a failure). The loop retries each a second later.",
		}, []string{"code"}),
	}
	t.failures.WithLabelValues(string(flashgate.CodeUnavailable))
	t.failures.WithLabelValues(string(flashgate.CodeStoreFull))
	return t
}

// observe is the issuer.TickObserver.
func (t *tickMetrics) observe(_ string, took time.Duration, _ issuer.TickResult, err error) {
	t.dur.Observe(took.Seconds())
	if err == nil || errors.Is(err, flashgate.ErrUnknownRoom) || errors.Is(err, context.Canceled) {
		return
	}
	t.failures.WithLabelValues(string(flashgate.ErrorCode(err))).Inc()
}
