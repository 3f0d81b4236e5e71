package deploy_test

import (
	"encoding/json"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/journal/consumer"
	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/server"
)

// recorder is a Registerer that notes the name of every metric the
// collectors registered with it describe.
type recorder struct {
	*prometheus.Registry
	names map[string]bool
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *recorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}
	return r.Registry.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// serverMetrics returns the names of the metrics flashgate exports: those
// a flashgate server registers and those of the journal process (`flashgate
// journal run`, consumer.NewMetrics). Building them sends nothing to Redis
// (the client points nowhere).
func serverMetrics(t *testing.T) map[string]bool {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	ring, err := keys.Generate(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	is, err := issuer.New(issuer.Config{Redis: rdb, Signer: ring})
	if err != nil {
		t.Fatal(err)
	}
	reg := &recorder{Registry: prometheus.NewRegistry(), names: map[string]bool{}}
	if _, err := server.New(server.Options{Issuer: is, Keys: ring, Registerer: reg, Gatherer: reg,
		RedisHealth: health{}}); err != nil {
		t.Fatal(err)
	}
	if len(reg.names) < 10 {
		t.Fatalf("the server registered only %v", reg.names)
	}
	n := len(reg.names)
	consumer.NewMetrics(reg)
	if len(reg.names) < n+14 {
		t.Fatalf("the journal registered only %d metrics: %v", len(reg.names)-n, reg.names)
	}
	return reg.names
}

type health struct{}

func (health) Up() bool         { return true }
func (health) Failures() uint64 { return 0 }
func (health) Rejected() uint64 { return 0 }

// known reports whether name is a registered metric or one of the series
// a registered histogram or summary exposes (name_bucket, _sum, _count).
func known(names map[string]bool, name string) bool {
	if names[name] {
		return true
	}
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, s); ok && names[base] {
			return true
		}
	}
	return false
}

// metricNames returns the flashgate_* metric names expr selects, parsed
// with Prometheus's PromQL parser.
func metricNames(t *testing.T, p parser.Parser, where, expr string) []string {
	t.Helper()
	e, err := p.ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return nil
	}
	var out []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && strings.HasPrefix(vs.Name, "flashgate_") {
			out = append(out, vs.Name)
		}
		return nil
	})
	return out
}

// TestAlertRules: prometheus/alerts.yml parses and validates as Prometheus
// does it (rulefmt: known fields only, PromQL expressions, templates), has
// the alerts docs/operations.md#observability lists, and every flashgate_* metric its
// expressions select exists in the server.
func TestAlertRules(t *testing.T) {
	names := serverMetrics(t)
	p := parser.NewParser(parser.Options{})
	rgs, errs := rulefmt.ParseFile("prometheus/alerts.yml", false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Error(err)
	}
	if rgs == nil {
		t.FailNow()
	}
	var alerts []string
	for _, g := range rgs.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			refs := metricNames(t, p, r.Alert, r.Expr)
			if len(refs) == 0 {
				t.Errorf("%s: selects no flashgate metric: %q", r.Alert, r.Expr)
			}
			for _, n := range refs {
				if !known(names, n) {
					t.Errorf("alert %s selects %s, which neither the server nor the journal exports", r.Alert, n)
				}
			}
		}
	}
	for _, want := range []string{"FlashgateQueueGrowing", "FlashgateAdmissionsStalled", "FlashgateRedisDown",
		"FlashgateRedisErrors", "FlashgateTickFailures", "FlashgateJournalLag", "FlashgateJournalRejected",
		"FlashgateOrderInversion", "FlashgateRateOvershoot", "FlashgateCapacityOvershoot", "FlashgateEstimateBiased",
		"FlashgateSigningKeyStale", "FlashgateStreamsNearCap"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("alert %s is missing (have %v)", want, alerts)
		}
	}
}

// TestDashboard: grafana/flashgate.json is a JSON dashboard whose every
// panel query parses as PromQL and selects only metrics the server or the
// journal process exports.
func TestDashboard(t *testing.T) {
	names := serverMetrics(t)
	b, err := os.ReadFile("grafana/flashgate.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana/flashgate.json: %v", err)
	}
	if d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("no title or no panels: %+v", d)
	}
	p := parser.NewParser(parser.Options{})
	used := map[string]bool{}
	for _, pn := range d.Panels {
		if len(pn.Targets) == 0 {
			t.Errorf("panel %q has no query", pn.Title)
		}
		for _, tg := range pn.Targets {
			for _, n := range metricNames(t, p, "panel "+pn.Title, tg.Expr) {
				used[n] = true
				if !known(names, n) {
					t.Errorf("panel %q selects %s, which neither the server nor the journal exports", pn.Title, n)
				}
			}
		}
	}
	for _, want := range []string{"flashgate_room_waiting", "flashgate_room_admitted_total",
		"flashgate_redis_script_duration_seconds_bucket", "flashgate_tick_failures_total",
		"flashgate_journal_lag_seconds", "flashgate_wait_seconds_bucket", "flashgate_estimate_error_seconds_bucket",
		"flashgate_estimate_over_seconds_total", "flashgate_estimate_under_seconds_total", "flashgate_order_inversions_total",
		"flashgate_rate_overshoot_total", "flashgate_capacity_overshoot_total"} {
		if !used[want] {
			t.Errorf("the dashboard shows no %s", want)
		}
	}
}

// TestKnownCatchesTypos: the check above fails on a name the server does
// not export, histogram suffixes only on histograms' bases.
func TestKnownCatchesTypos(t *testing.T) {
	names := serverMetrics(t)
	for _, n := range []string{"flashgate_room_waitng", "flashgate_room_waiting_bucket_x", "flashgate_nope_count"} {
		if known(names, n) {
			t.Errorf("%s passes as known", n)
		}
	}
	if !known(names, "flashgate_tick_duration_seconds_bucket") {
		t.Error("a histogram's _bucket series is not known")
	}
}
