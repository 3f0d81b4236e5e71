package deploy_test

// The findings of issue 32 ("a production rollout a platform team would sign
// off"), one test each, against the chart rendered as `helm install
// --dry-run` renders it (schema validation included). Each fails on the
// chart of 4dbe417.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/strvals"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

const full = release + "-flashgate"

func mustRender(t *testing.T, vals map[string]any) rendered {
	t.Helper()
	r, err := render(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// set parses `--set` strings as helm does.
func set(t *testing.T, sets ...string) map[string]any {
	t.Helper()
	v := map[string]any{}
	for _, s := range sets {
		if err := strvals.ParseInto(s, v); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

func issuerContainer(t *testing.T, r rendered) (corev1.PodSpec, corev1.Container, map[string]corev1.EnvVar) {
	t.Helper()
	d := get[*appsv1.Deployment](t, r, "Deployment", full+"-issuer")
	c := d.Spec.Template.Spec.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	return d.Spec.Template.Spec, c, env
}

// valuesFiles lists every values file the chart ships: ci/ (CI's cases)
// and examples/ (one per topology), relative to the chart.
func valuesFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{"ci", "examples"} {
		fs, _ := filepath.Glob(filepath.Join(chartDir, dir, "*.yaml"))
		for _, f := range fs {
			out = append(out, strings.TrimPrefix(f, chartDir+"/"))
		}
	}
	return out
}

func readValues(t *testing.T, rel string) map[string]any {
	t.Helper()
	v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Finding 1. The issuer's memory fits docs/sizing.md: a per-replica cap on
// open event streams (FLASHGATE_MAX_STREAMS) whose streams fit the memory
// limit at m_stream each, requests equal to limits, and the default replicas'
// caps together hold example A's line on event streams (f·W); the HPA can
// scale on open streams (a Pods metric the server exports).
func TestChartMemoryFitsSizingExampleA(t *testing.T) {
	doc, err := os.ReadFile(sizingDoc)
	if err != nil {
		t.Fatal(err)
	}
	rows := tableRows(t, string(doc))
	mStream := number(t, rows["m_stream"][1]) * 1e3 // KB → bytes
	ex := regexp.MustCompile(`(?m)^\| A \| ([0-9]+) \| ([0-9]+) \| ([0-9]+) \| ([0-9.]+) \|$`).FindStringSubmatch(string(doc))
	if ex == nil {
		t.Fatalf("%s: no example A", sizingDoc)
	}
	N, T, R, f := number(t, ex[1]), number(t, ex[2]), number(t, ex[3]), number(t, ex[4])
	streams := f * (N - R*T)

	r := mustRender(t, nil)
	d := get[*appsv1.Deployment](t, r, "Deployment", full+"-issuer")
	_, c, env := issuerContainer(t, r)
	limit, ok := c.Resources.Limits[corev1.ResourceMemory]
	if !ok {
		t.Fatal("the issuer has no memory limit")
	}
	if req := c.Resources.Requests[corev1.ResourceMemory]; req.Cmp(limit) != 0 {
		t.Errorf("memory request %s ≠ limit %s: a node may overcommit the streams' memory", req.String(), limit.String())
	}
	capStreams := 0
	if _, err := fmt.Sscan(env["FLASHGATE_MAX_STREAMS"].Value, &capStreams); err != nil || capStreams <= 0 {
		t.Fatalf("FLASHGATE_MAX_STREAMS = %q: no per-replica cap on open event streams", env["FLASHGATE_MAX_STREAMS"].Value)
	}
	const base = 256 << 20 // the process without streams, requests in flight
	if need := float64(capStreams)*mStream + base; need > float64(limit.Value()) {
		t.Errorf("%d streams × %.0f B + 256 MiB = %.2f GiB exceed the memory limit %s: the replica is OOM-killed before its cap refuses",
			capStreams, mStream, need/(1<<30), limit.String())
	}
	if held := float64(*d.Spec.Replicas * int32(capStreams)); held < streams {
		t.Errorf("%d replicas × %d streams = %.0f < example A's %.0f streams on event streams", *d.Spec.Replicas, capStreams, held, streams)
	}
	t.Logf("example A: %.0f streams; %d replicas × %d = %d; %.2f GiB of %s per replica at the cap",
		streams, *d.Spec.Replicas, capStreams, *d.Spec.Replicas*int32(capStreams), float64(capStreams)*mStream/(1<<30), limit.String())

	r = mustRender(t, set(t, "issuer.autoscaling.enabled=true", "issuer.autoscaling.streams.enabled=true"))
	hpa := get[*autoscalingv2.HorizontalPodAutoscaler](t, r, "HorizontalPodAutoscaler", full+"-issuer")
	var pods *autoscalingv2.PodsMetricSource
	for _, m := range hpa.Spec.Metrics {
		if m.Type == autoscalingv2.PodsMetricSourceType {
			pods = m.Pods
		}
	}
	if pods == nil || pods.Metric.Name != "flashgate_sse_streams_open" || !known(serverMetrics(t), pods.Metric.Name) {
		t.Fatalf("the HPA does not scale on open event streams: %+v", hpa.Spec.Metrics)
	}
	if v := pods.Target.AverageValue.Value(); v <= 0 || v >= int64(capStreams) {
		t.Errorf("the HPA's streams target %d must be under the replica's cap %d (scale before refusing)", v, capStreams)
	}
}

// Finding 2. /metrics is served on its own port, never the API's: the
// public Service has no metrics port, the ServiceMonitor scrapes the
// metrics port of headless Services only, and the NetworkPolicies deny by
// default: every ingress rule names its peers, and the metrics ports admit
// the monitoring namespace only.
func TestChartMetricsOffThePublicPort(t *testing.T) {
	for _, file := range append([]string{""}, valuesFiles(t)...) {
		t.Run(file, func(t *testing.T) {
			vals := map[string]any{}
			if file != "" {
				vals = readValues(t, file)
			}
			r := mustRender(t, vals)
			_, c, env := issuerContainer(t, r)
			addr := env["FLASHGATE_METRICS_ADDR"].Value
			var metricsPort int32
			for _, p := range c.Ports {
				if p.Name == "metrics" {
					metricsPort = p.ContainerPort
				}
			}
			if addr == "" || metricsPort == 0 || metricsPort == 8080 || addr != fmt.Sprintf(":%d", metricsPort) {
				t.Fatalf("FLASHGATE_METRICS_ADDR %q, metrics container port %d: /metrics stays on the API's port", addr, metricsPort)
			}
			svc := get[*corev1.Service](t, r, "Service", full)
			for _, p := range svc.Spec.Ports {
				if p.TargetPort.String() == "metrics" || p.TargetPort.IntValue() == int(metricsPort) {
					t.Errorf("the public Service exposes the metrics port: %+v", p)
				}
			}
			if sm, ok := r["ServiceMonitor/"+full].(*monitoringv1.ServiceMonitor); ok {
				sel, _ := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
				if sel.Matches(labels.Set(svc.Labels)) {
					t.Error("the ServiceMonitor selects the public Service")
				}
				for _, e := range sm.Spec.Endpoints {
					if e.Port != "metrics" {
						t.Errorf("the ServiceMonitor scrapes port %q", e.Port)
					}
				}
				scraped := map[string]bool{}
				for _, s := range all[*corev1.Service](r) {
					if sel.Matches(labels.Set(s.Labels)) {
						scraped[s.Labels["app.kubernetes.io/component"]] = true
					}
				}
				if !scraped["issuer"] || (r["Deployment/"+full+"-journal"] != nil && !scraped["journal"]) {
					t.Errorf("the ServiceMonitor scrapes %v", scraped)
				}
			}
			if r["NetworkPolicy/"+full+"-issuer"] == nil {
				return
			}
			monitoring := vals["networkPolicy"]
			ns := "monitoring"
			if m, ok := monitoring.(map[string]any); ok && m["monitoringNamespace"] != nil {
				ns = m["monitoringNamespace"].(string)
			}
			for _, np := range all[*networkingv1.NetworkPolicy](r) {
				if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
					t.Errorf("NetworkPolicy %s does not govern ingress", np.Name)
				}
				for _, rule := range np.Spec.Ingress {
					if len(rule.From) == 0 {
						t.Errorf("NetworkPolicy %s admits anyone on %v", np.Name, rule.Ports)
					}
					for _, p := range rule.Ports {
						if p.Port.String() != "metrics" {
							continue
						}
						for _, peer := range rule.From {
							if peer.NamespaceSelector == nil || peer.PodSelector != nil ||
								peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != ns {
								t.Errorf("NetworkPolicy %s admits %+v to the metrics port, want the %s namespace only", np.Name, peer, ns)
							}
						}
					}
				}
			}
		})
	}
}

// Finding 3. Two renders are identical (no random value, no lookup whose
// answer differs between `helm template` and `helm install`), so a GitOps
// sync changes nothing and rolls no pod; the admin token comes from a
// Secret the install hook fills once.
func TestChartRendersTheSameTwice(t *testing.T) {
	for _, file := range append([]string{""}, valuesFiles(t)...) {
		vals := map[string]any{}
		if file != "" {
			vals = readValues(t, file)
		}
		a, err := manifests(t, vals, kubeVersion)
		if err != nil {
			t.Fatal(err)
		}
		b, err := manifests(t, vals, kubeVersion)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a, b) {
			for i := range a {
				if a[i] != b[i] {
					t.Errorf("%q: two renders differ:\n%s", file, firstDiff(a[i], b[i]))
					break
				}
			}
		}
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, al[i], bl[i])
		}
	}
	return "lengths differ"
}

// Finding 4. The rotation CronJob rotates at most once per period whatever
// its retries (-min-key-age, a duration of at least an hour and under the
// weekly schedule's period), and the alert rules warn when the key ring is
// not rotated as planned.
func TestChartRotationOncePerPeriod(t *testing.T) {
	r := mustRender(t, nil)
	cj := get[*batchv1.CronJob](t, r, "CronJob", full+"-keys-rotate")
	args := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args
	i := slices.Index(args, "-min-key-age")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("keys rotate %q: no -min-key-age, so a retry or a second release rotates again", args)
	}
	age, err := time.ParseDuration(args[i+1])
	if err != nil || age < time.Hour || age >= 7*24*time.Hour {
		t.Errorf("-min-key-age %q (%v): want at least 1h (JWKS caches, kubelet sync) and under the weekly period", args[i+1], err)
	}
	var rules monitoringv1.PrometheusRuleSpec
	data, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range rules.Groups {
		for _, rule := range g.Rules {
			if rule.Alert == "FlashgateSigningKeyStale" && strings.Contains(rule.Expr.String(), "flashgate_signing_key_created_timestamp_seconds") {
				found = true
			}
		}
	}
	if !found {
		t.Error("no alert FlashgateSigningKeyStale on flashgate_signing_key_created_timestamp_seconds")
	}
}

// Finding 5. values.schema.json refuses bad values (helm install and
// template validate against it) and names every value of values.yaml.
func TestChartSchemaRefusesBadValues(t *testing.T) {
	for _, bad := range []string{
		"issuer.replicas=three",
		"issuer.replica=3",
		"issuer.replicas=0",
		"image.pullPolicy=Sometimes",
		"image.digest=latest",
		"issuer.maxStreams=-1",
		"redis.url=http://redis:6379",
		"adminToken.value=short",
		"keys.rotation.minKeyAge=tomorrow",
		"networkPolicy.egress.ports={0}",
		"issuer.metricsPort=8080",
		"issuer.autoscaling.targetCPUUtilizationPercentage=150",
		"journal.podDisruptionBudget.maxUnavailable=lots",
		"issuer.extraEnv[0].value=x",
	} {
		t.Run(bad, func(t *testing.T) {
			_, err := manifests(t, set(t, bad), kubeVersion)
			if err == nil || !strings.Contains(err.Error(), "schema") {
				t.Errorf("--set %s: rendered (%v); want the schema to refuse it", bad, err)
			}
		})
	}
}

func TestChartSchemaCoversEveryValue(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	var walk func(path string, v any, s map[string]any)
	walk = func(path string, v any, s map[string]any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		props, _ := s["properties"].(map[string]any)
		if props == nil {
			if s["additionalProperties"] == false {
				t.Errorf("%s: the schema allows no keys", path)
			}
			return // a Kubernetes type (resources, affinity, …) or a free map (labels, env)
		}
		if s["additionalProperties"] != false {
			t.Errorf("%s: the schema accepts unknown keys", path)
		}
		for k, sub := range m {
			ps, ok := props[k].(map[string]any)
			if !ok {
				t.Errorf("%s.%s: not in values.schema.json", path, k)
				continue
			}
			if ps["description"] == nil && ps["type"] == nil && ps["anyOf"] == nil {
				t.Errorf("%s.%s: the schema gives it no type", path, k)
			}
			walk(path+"."+k, sub, ps)
		}
	}
	walk("", ch.Values, schema)
}

// Finding 6. Readiness is this replica's (/readyz/replica: a Redis failover
// leaves every pod in the Service), with a timeout over the handler's
// budget; a startup probe covers serve's wait for Redis.
func TestChartProbesSurviveARedisFailover(t *testing.T) {
	r := mustRender(t, nil)
	_, c, _ := issuerContainer(t, r)
	rp := c.ReadinessProbe
	if rp == nil || rp.HTTPGet == nil || rp.HTTPGet.Path != "/readyz/replica" {
		t.Fatalf("readiness probe %+v: want /readyz/replica (the deep /readyz follows the shared Redis)", rp)
	}
	if rp.TimeoutSeconds < 3 {
		t.Errorf("readiness timeout %d s: under the handlers' 2 s budget plus a margin", rp.TimeoutSeconds)
	}
	sp := c.StartupProbe
	if sp == nil || sp.HTTPGet == nil || sp.PeriodSeconds*sp.FailureThreshold < 60 {
		t.Fatalf("startup probe %+v: want one covering at least a minute of waiting for Redis", sp)
	}
	if lp := c.LivenessProbe; lp == nil || lp.HTTPGet.Path != "/healthz" {
		t.Errorf("liveness %+v", lp)
	}
}

// Finding 7. The default image is what `make image` tags (TestImage checks
// the tag), a digest pins it, and the project is licensed.
func TestChartImageSupplyChain(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("../scripts/build-image.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(script, []byte("CHART_IMAGE")) || !bytes.Contains(script, []byte("--platform")) {
		t.Error("scripts/build-image.sh neither tags the chart's default image nor builds per platform")
	}
	_, c, _ := issuerContainer(t, mustRender(t, nil))
	if want := ch.Values["image"].(map[string]any)["repository"].(string) + ":" + ch.Metadata.AppVersion; c.Image != want {
		t.Errorf("default image %s, want %s", c.Image, want)
	}
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	r := mustRender(t, set(t, "image.digest="+digest, "image.tag=9.9.9"))
	for _, d := range all[*appsv1.Deployment](r) {
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "localhost/flashgate@"+digest {
			t.Errorf("%s runs %s, want the pinned localhost/flashgate@%s", d.Name, img, digest)
		}
	}
	lic, err := os.ReadFile("../LICENSE")
	if err != nil || !bytes.Contains(lic, []byte("Apache License")) || !bytes.Contains(lic, []byte("Version 2.0, January 2004")) {
		t.Errorf("../LICENSE: %v; want the Apache License 2.0", err)
	}
	if _, err := os.Stat("../NOTICE"); err != nil {
		t.Error(err)
	}
}

// Finding 8. Extension points and what a platform team expects of a chart:
// extraEnv with valueFrom, extra volumes (a private CA), ServiceAccount
// annotations (workload identity), a journal PDB, kubeVersion (the preStop
// sleep needs 1.30), a helm test that runs `flashgate smoke`, and NOTES
// whose link resolves.
func TestChartExtensionPoints(t *testing.T) {
	vals := readValues(t, "ci/standalone-values.yaml")
	extra := set(t,
		"issuer.extraEnv[0].name=REDIS_PASSWORD", "issuer.extraEnv[0].valueFrom.secretKeyRef.name=redis-auth",
		"issuer.extraEnv[0].valueFrom.secretKeyRef.key=password",
		"issuer.extraVolumes[0].name=redis-ca", "issuer.extraVolumes[0].configMap.name=redis-ca",
		"issuer.extraVolumeMounts[0].name=redis-ca", "issuer.extraVolumeMounts[0].mountPath=/etc/flashgate/ca",
		"serviceAccount.annotations.iam\\.gke\\.io/gcp-service-account=flashgate@shop.iam.gserviceaccount.com")
	r := mustRender(t, chartutil.CoalesceTables(extra, vals))
	pod, c, env := issuerContainer(t, r)
	if e := env["REDIS_PASSWORD"]; e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "redis-auth" {
		t.Errorf("extraEnv valueFrom: %+v", e)
	}
	if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "redis-ca" && v.ConfigMap != nil }) ||
		!slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/etc/flashgate/ca" }) {
		t.Errorf("extra volumes: %+v %+v", pod.Volumes, c.VolumeMounts)
	}
	sa := get[*corev1.ServiceAccount](t, r, "ServiceAccount", pod.ServiceAccountName)
	if sa.Annotations["iam.gke.io/gcp-service-account"] == "" {
		t.Errorf("ServiceAccount %s annotations %v", sa.Name, sa.Annotations)
	}
	jpdb := get[*policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget", full+"-journal")
	jr := get[*appsv1.Deployment](t, r, "Deployment", full+"-journal")
	if sel, _ := metav1.LabelSelectorAsSelector(jpdb.Spec.Selector); !sel.Matches(labels.Set(jr.Spec.Template.Labels)) {
		t.Error("the journal PDB does not select the journal pods")
	}
	if jr.Spec.Template.Spec.ServiceAccountName != pod.ServiceAccountName {
		t.Error("the journal runs as another ServiceAccount")
	}

	test := get[*corev1.Pod](t, r, "Pod", full+"-test")
	tc := test.Spec.Containers[0]
	if test.Annotations["helm.sh/hook"] != "test" || len(tc.Args) < 3 || tc.Args[0] != "smoke" ||
		!strings.HasPrefix(tc.Args[2], "http://"+full+"."+namespace+".svc:") {
		t.Errorf("helm test pod %v runs %q", test.Annotations, tc.Args)
	}
	if tok := tc.Env[0]; tok.Name != "FLASHGATE_ADMIN_TOKEN" || tok.ValueFrom == nil {
		t.Errorf("the test pod's admin token: %+v", tok)
	}

	// Worked values per topology (each rendered by the tests above).
	for _, ex := range []string{"redis-standalone", "redis-sentinel", "redis-cluster", "redis-managed",
		"postgresql-cloudnativepg", "postgresql-managed"} {
		if !slices.Contains(valuesFiles(t), "examples/"+ex+".yaml") {
			t.Errorf("no examples/%s.yaml", ex)
		}
	}

	old := &chartutil.KubeVersion{Version: "v1.29.9", Major: "1", Minor: "29"}
	if _, err := manifests(t, nil, old); err == nil || !strings.Contains(err.Error(), "kubeVersion") {
		t.Errorf("Kubernetes 1.29 (no preStop sleep action): %v; want the chart's kubeVersion to refuse it", err)
	}

	docs, err := manifests(t, nil, kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	notes := docs[len(docs)-1]
	links := regexp.MustCompile(`(docs/[a-z-]+\.md|README\.md)#([a-z0-9-]+)`).FindAllStringSubmatch(notes, -1)
	if len(links) == 0 {
		t.Fatalf("NOTES.txt links to no guide:\n%s", notes)
	}
	for _, l := range links {
		doc, err := os.ReadFile(filepath.Join("..", l[1]))
		if err != nil || !slices.Contains(anchors(string(doc)), l[2]) {
			t.Errorf("NOTES.txt links to %s#%s, which does not resolve (%v)", l[1], l[2], err)
		}
	}
}

// anchors lists the GitHub anchors of a Markdown document's headings.
func anchors(doc string) []string {
	var out []string
	for _, line := range strings.Split(doc, "\n") {
		h, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		h = strings.ToLower(strings.TrimSpace(strings.TrimLeft(h, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}

// helmDocs is the pinned helm-docs (from the Go module proxy) that writes
// the chart's README.md from values.yaml and README.md.gotmpl (make docs).
const helmDocs = "github.com/norwoodj/helm-docs/cmd/helm-docs@v1.14.2"

// TestChartReadme: helm/flashgate/README.md is what helm-docs generates
// from values.yaml now (a golden test, like docs/configuration.md's): a
// value added or reworded without `make docs` fails here.
func TestChartReadme(t *testing.T) {
	cmd := exec.Command("go", "run", helmDocs, "--dry-run", "-c", chartDir, "-s", "file", "--skip-version-footer", "-l", "error")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	want, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm-docs: %v\n%s", err, stderr.String())
	}
	got, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the chart's README is stale: run make docs\n%s", firstDiff(string(got), string(want)))
	}
	for _, row := range strings.Split(string(got), "\n") {
		if strings.HasPrefix(row, "| ") && strings.HasSuffix(row, "|  |") {
			t.Errorf("a value without a description (add a `# --` comment in values.yaml): %s", row)
		}
	}
}
