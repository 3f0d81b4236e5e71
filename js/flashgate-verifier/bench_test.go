package verifierjs

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testing/tokencases"
	"github.com/flashgate/flashgate/internal/testing/wasmbuild"
)

// Budgets of issue 10 (docs/performance.md#measurements): the package's verify in Node
// against native verifier.Verify in the same run.
const (
	budgetHost = 2.0 // host crypto ≤ 2× native
	budgetPure = 8.0 // pure wasm ≤ 8× native
)

// nodeFigures is the JSON test/bench.mjs prints: µs per verify.
type nodeFigures struct {
	Runtime   string `json:"runtime"`
	OpenSSL   string `json:"openssl"`
	HostNode  figure `json:"host_node"`
	RawNode   figure `json:"raw_node"`
	HostWeb16 figure `json:"host_web16"`
	RawWeb16  figure `json:"raw_web16"`
	Pure      figure `json:"pure"`
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
		{"package, host crypto (node:crypto, the default)", f.HostNode, budgetHost},
		{"  its limit: raw node:crypto.verify", f.RawNode, 0},
		{"package, host crypto (WebCrypto), 16 in flight", f.HostWeb16, budgetHost},
		{"  its limit: raw crypto.subtle.verify, 16 in flight", f.RawWeb16, 0},
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
	fmt.Fprintf(&s, "host path over its limit (CPU): %.2f× node:crypto, %.2f× WebCrypto",
		f.HostNode.CPU/f.RawNode.CPU, f.HostWeb16.CPU/f.RawWeb16.CPU)
	b.Log("\n" + s.String())
	b.ReportMetric(nat, "native-µs")
	b.ReportMetric(f.HostNode.CPU/nat, "host/native")
	b.ReportMetric(f.RawNode.CPU/nat, "raw-host/native")
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
	// A plain timed loop: testing.Benchmark cannot run inside a benchmark.
	run := func(n int) time.Duration {
		start := time.Now()
		for range n {
			if _, err := v.Verify(ctx, c.Token, c.Expect()); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	run(200) // warm up
	const n = 4000
	return float64(run(n)) / n / float64(time.Microsecond)
}
