package verifierjs

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/tokencases"
	"github.com/flashgate/flashgate/internal/wasmbuild"
)

// Budgets of issue 10 (README "Measurements"): the package's verify in Node
// against native verifier.Verify in the same run.
const (
	budgetHost = 2.0 // host crypto ≤ 2× native
	budgetPure = 8.0 // pure wasm ≤ 8× native
)

// nodeFigures is the JSON test/bench.mjs prints: µs per verify.
type nodeFigures struct {
	Runtime string `json:"runtime"`
	OpenSSL string `json:"openssl"`
	HostSeq figure `json:"host_seq"`
	Host16  figure `json:"host_16"`
	RawSeq  figure `json:"raw_seq"`
	Raw16   figure `json:"raw_16"`
	Pure    figure `json:"pure"`
}

type figure struct {
	Wall float64 `json:"wall_us"`
	CPU  float64 `json:"cpu_us"`
}

// BenchmarkPackageNode runs the package in Node (test/bench.mjs: both paths
// and the host's raw crypto.subtle.verify, the physical limit of the host
// path) and native verifier.Verify in this process, and reports the ratios
// next to their budgets. b.N is not used: one run of each is the measurement
// (medians of three interleaved rounds inside bench.mjs).
func BenchmarkPackageNode(b *testing.B) {
	wasm := wasmbuild.Path(b)
	native := nativeVerifyMicros(b)
	out, err := exec.Command("node", "test/bench.mjs", wasm, "4000").Output()
	if err != nil {
		b.Fatalf("node test/bench.mjs: %v\n%s", err, out)
	}
	var f nodeFigures
	if err := json.Unmarshal(out, &f); err != nil {
		b.Fatalf("bench.mjs output %q: %v", out, err)
	}
	native2 := nativeVerifyMicros(b) // after too: the machine drifts
	nat := (native + native2) / 2
	rows := []struct {
		name   string
		fig    figure
		budget float64
	}{
		{"package, host crypto, one at a time", f.HostSeq, budgetHost},
		{"package, host crypto, 16 in flight", f.Host16, budgetHost},
		{"raw crypto.subtle.verify, one at a time (limit)", f.RawSeq, 0},
		{"raw crypto.subtle.verify, 16 in flight (limit)", f.Raw16, 0},
		{"package, pure wasm", f.Pure, budgetPure},
	}
	var s strings.Builder
	fmt.Fprintf(&s, "%s (OpenSSL %s); native verifier.Verify %.1f µs (CPU, one core)\n", f.Runtime, f.OpenSSL, nat)
	fmt.Fprintf(&s, "%-50s %9s %9s %10s %8s %s\n", "path", "wall µs", "CPU µs", "CPU/native", "budget", "")
	for _, r := range rows {
		ratio := r.fig.CPU / nat
		verdict, budget := "", "—"
		if r.budget > 0 {
			budget = fmt.Sprintf("≤ %.0f×", r.budget)
			verdict = "PASS"
			if ratio > r.budget {
				verdict = "OVER"
			}
		}
		fmt.Fprintf(&s, "%-50s %9.1f %9.1f %9.2f× %8s %s\n", r.name, r.fig.Wall, r.fig.CPU, ratio, budget, verdict)
	}
	fmt.Fprintf(&s, "host path over its limit: %.2f× (one at a time), %.2f× (16 in flight), CPU",
		f.HostSeq.CPU/f.RawSeq.CPU, f.Host16.CPU/f.Raw16.CPU)
	b.Log("\n" + s.String())
	b.ReportMetric(nat, "native-µs")
	b.ReportMetric(f.Host16.CPU/nat, "host/native")
	b.ReportMetric(f.Raw16.CPU/nat, "raw-host/native")
	b.ReportMetric(f.Pure.CPU/nat, "pure/native")
}

// nativeVerifyMicros is the CPU time of one native verifier.Verify of the
// case table's valid token, µs.
func nativeVerifyMicros(b *testing.B) float64 {
	set := tokencases.MustLoad(b, tokencases.GoldenPath(2))
	var c tokencases.Case
	for _, x := range set.Cases {
		if x.Name == "valid" {
			c = x
		}
	}
	v := tokencases.Verifier(b, set, set.Config(c))
	ctx := context.Background()
	r := testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			if _, err := v.Verify(ctx, c.Token, c.Expect()); err != nil {
				b.Fatal(err)
			}
		}
	})
	return float64(r.T) / float64(r.N) / float64(time.Microsecond)
}
