package deploy_test

import (
	"bufio"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// sizingDoc is the sizing guide whose worked examples TestSizingExamples
// recomputes.
const sizingDoc = "../docs/sizing.md"

// tableRows returns the cells of the Markdown table rows of doc whose first
// cell is a `key` (code-quoted), by key.
func tableRows(t *testing.T, doc string) map[string][]string {
	t.Helper()
	rows := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(doc))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		key := strings.Trim(cells[0], "`")
		if _, dup := rows[key]; dup {
			t.Fatalf("%s: key %s twice", sizingDoc, key)
		}
		rows[key] = cells[1:]
	}
	return rows
}

func number(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	if err != nil {
		t.Fatalf("%s: %q is not a number", sizingDoc, s)
	}
	return v
}

// TestSizingExamples recomputes docs/sizing.md's worked examples from its
// inputs table (the measured per-operation costs), its budgets and its
// examples' N, T, R and f, by the formulas the guide states, and compares
// every figure at the precision the guide prints it: an input changed after
// a new measurement fails this until the examples follow.
func TestSizingExamples(t *testing.T) {
	data, err := os.ReadFile(sizingDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	rows := tableRows(t, doc)
	in := func(key string) float64 {
		t.Helper()
		r, ok := rows[key]
		if !ok || len(r) < 3 {
			t.Fatalf("%s: no input row `%s`", sizingDoc, key)
		}
		return number(t, r[1])
	}
	budgets := map[string]float64{}
	for _, m := range regexp.MustCompile("`(u_cpu|c_replica|m_replica|u_redis)` = ([0-9.]+) ?(GiB)?").FindAllStringSubmatch(doc, -1) {
		v := number(t, m[2])
		if m[3] == "GiB" {
			v *= 1 << 30
		}
		budgets[m[1]] = v
	}
	if len(budgets) != 4 {
		t.Fatalf("%s: budgets %v, want u_cpu, c_replica, m_replica and u_redis", sizingDoc, budgets)
	}

	examples := regexp.MustCompile(`(?m)^\| ([A-Z]) \| ([0-9]+) \| ([0-9]+) \| ([0-9]+) \| ([0-9.]+) \|$`).FindAllStringSubmatch(doc, -1)
	if len(examples) != 3 {
		t.Fatalf("%s: %d examples, want 3", sizingDoc, len(examples))
	}
	figures := []string{"E", "W", "S", "S_news", "S_exact", "redis_exact", "redis_snap", "snapshot", "issuer_cpu", "replicas_cpu",
		"stream_gb", "replicas_mem", "replicas", "redis_mb", "redis_mb_max", "journal_eps", "journal_procs"}
	for col, ex := range examples {
		N, T, R, f := number(t, ex[2]), number(t, ex[3]), number(t, ex[4]), number(t, ex[5])
		polls := func(W float64) float64 { // issuer/entry.go pollAfter: clamp(p/2R, 1 s, 30 s)
			s := math.Min(W, 2*R)
			if W > 2*R {
				s += 2 * R * math.Log(math.Min(W, 60*R)/(2*R))
			}
			return s + math.Max(0, W-60*R)/30
		}
		E, W := N/T, N-R*T
		S := polls(W)
		Sx := polls(math.Min(W, 6*R)) // issuer/snapshot.go nearHead at tick 1 s, age 500 ms
		Sn := polls(math.Min(W, 8*R)) // the same for a stream's room news, up to 2 s old
		perAdmitted := R * (in("r_exchange") + in("r_complete") + in("r_tick"))
		streamsRedis := E*in("r_enter") + f*Sn*in("r_status") + perAdmitted
		redisExact := (streamsRedis + (1-f)*S*in("r_status")) / 1e6
		redisSnap := (streamsRedis + (1-f)*(Sx*in("r_status")+(S-Sx)*in("r_snap"))) / 1e6
		snapshot := redisExact > budgets["u_redis"]
		cpu := E*in("s_enter") + R*(in("s_exchange")+in("s_complete")) + f*S*in("s_event")
		if snapshot {
			cpu += (1 - f) * (Sx*in("s_status") + (S-Sx)*in("s_snap"))
		} else {
			cpu += (1 - f) * S * in("s_status")
		}
		cpu /= 1e6
		streams := f * W * in("m_stream") * 1e3
		replicasCPU := math.Ceil(cpu / (budgets["u_cpu"] * budgets["c_replica"]))
		replicasMem := math.Ceil(streams / budgets["m_replica"])
		got := map[string]float64{
			"E": E, "W": W, "S": S, "S_news": Sn, "S_exact": Sx, "redis_exact": redisExact, "redis_snap": redisSnap,
			"issuer_cpu": cpu, "replicas_cpu": replicasCPU, "stream_gb": streams / 1e9, "replicas_mem": replicasMem,
			"replicas": math.Max(3, math.Max(replicasCPU, replicasMem)),
			"redis_mb": W * in("m_wait") / 1e6, "redis_mb_max": N * (in("m_wait") + in("m_event")) / 1e6,
			"journal_eps": E + 3*R, "journal_procs": math.Ceil((E + 3*R) / in("j_rate")),
		}
		for _, key := range figures {
			r, ok := rows[key]
			if !ok || len(r) < 1+len(examples) {
				t.Fatalf("%s: no figure row `%s`", sizingDoc, key)
			}
			cell := r[1+col]
			if key == "snapshot" {
				if want := map[bool]string{true: "yes", false: "no"}[snapshot]; cell != want {
					t.Errorf("example %s: snapshot %q, the inputs say %q", ex[1], cell, want)
				}
				continue
			}
			decimals := 0
			if i := strings.IndexByte(cell, '.'); i >= 0 {
				decimals = len(cell) - i - 1
			}
			scale := math.Pow(10, float64(decimals))
			if want := math.Round(got[key]*scale) / scale; math.Abs(number(t, cell)-want) > 1e-9 {
				t.Errorf("example %s: `%s` is %s in the guide, the inputs give %.*f (%g)", ex[1], key, cell, decimals, want, got[key])
			}
		}
	}
}
