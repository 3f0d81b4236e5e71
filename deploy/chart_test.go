package deploy_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/flashgate/flashgate/internal/redisconn"
)

const (
	chartDir  = "helm/flashgate"
	release   = "sale"
	namespace = "shop"
)

// kubeVersion is the Kubernetes the chart is rendered for: the oldest it
// supports (the preStop sleep action is on by default from 1.30).
var kubeVersion = &chartutil.KubeVersion{Version: "v1.30.0", Major: "1", Minor: "30"}

// newObject returns an empty typed object for a rendered document's kind:
// every kind the chart may render, and nothing else.
func newObject(apiVersion, kind string) (any, bool) {
	switch apiVersion + " " + kind {
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}, true
	case "v1 Service":
		return &corev1.Service{}, true
	case "v1 Secret":
		return &corev1.Secret{}, true
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}, true
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}, true
	case "v1 Pod":
		return &corev1.Pod{}, true
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, true
	case "autoscaling/v2 HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}, true
	case "batch/v1 Job":
		return &batchv1.Job{}, true
	case "batch/v1 CronJob":
		return &batchv1.CronJob{}, true
	case "networking.k8s.io/v1 NetworkPolicy":
		return &networkingv1.NetworkPolicy{}, true
	case "rbac.authorization.k8s.io/v1 Role":
		return &rbacv1.Role{}, true
	case "rbac.authorization.k8s.io/v1 RoleBinding":
		return &rbacv1.RoleBinding{}, true
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}, true
	case "monitoring.coreos.com/v1 PrometheusRule":
		return &monitoringv1.PrometheusRule{}, true
	}
	return nil, false
}

// rendered is one `helm template`: its objects by "Kind/name", decoded
// strictly into the Kubernetes API types.
type rendered map[string]any

func get[T any](t *testing.T, r rendered, kind, name string) T {
	t.Helper()
	o, ok := r[kind+"/"+name].(T)
	if !ok {
		t.Fatalf("no %s/%s rendered; have %v", kind, name, r.names())
	}
	return o
}

func (r rendered) names() []string {
	var n []string
	for k := range r {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

func all[T any](r rendered) []T {
	var out []T
	for _, k := range r.names() {
		if o, ok := r[k].(T); ok {
			out = append(out, o)
		}
	}
	return out
}

// values reads a values file of the chart's ci/ (none: the defaults).
func values(t *testing.T, file string) map[string]any {
	t.Helper()
	if file == "" {
		return map[string]any{}
	}
	v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "ci", file))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// render runs `helm lint` and `helm template` (the helm Go module) with vals,
// and decodes every object, hooks included, refusing unknown fields.
func render(t *testing.T, vals map[string]any) (rendered, error) {
	t.Helper()
	lint := action.NewLint()
	lint.Namespace = namespace
	lint.KubeVersion = kubeVersion
	res := lint.Run([]string{chartDir}, vals)
	for _, m := range res.Messages {
		if m.Severity > support.InfoSev {
			return nil, fmt.Errorf("helm lint: %s", m)
		}
	}
	docs, err := manifests(t, vals, kubeVersion)
	if err != nil {
		return nil, err
	}
	out := rendered{}
	for _, d := range docs[:len(docs)-1] { // the last: NOTES.txt
		for _, doc := range releaseutil.SplitManifests(d) {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				t.Fatalf("%v\n%s", err, doc)
			}
			obj, ok := newObject(tm.APIVersion, tm.Kind)
			if !ok {
				t.Fatalf("the chart rendered an unexpected %s %s:\n%s", tm.APIVersion, tm.Kind, doc)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Fatalf("%s %s does not decode strictly: %v\n%s", tm.APIVersion, tm.Kind, err, doc)
			}
			name := reflect.ValueOf(obj).Elem().FieldByName("ObjectMeta").Interface().(metav1.ObjectMeta).Name
			key := tm.Kind + "/" + name
			if _, dup := out[key]; dup {
				t.Fatalf("%s rendered twice", key)
			}
			out[key] = obj
		}
	}
	return out, nil
}

// manifests runs `helm install --dry-run` client-only (schema validation
// included) for kube and returns the release's manifest and each hook's,
// as rendered; NOTES.txt last.
func manifests(t *testing.T, vals map[string]any, kube *chartutil.KubeVersion) ([]string, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.DryRun, inst.ClientOnly, inst.Replace = true, true, true
	inst.ReleaseName, inst.Namespace, inst.KubeVersion = release, namespace, kube
	rel, err := inst.Run(ch, vals)
	if err != nil {
		return nil, err
	}
	docs := []string{rel.Manifest}
	for _, h := range rel.Hooks {
		docs = append(docs, h.Manifest)
	}
	return append(docs, rel.Info.Notes), nil
}

type topology struct {
	file     string
	redis    redisconn.Mode
	journal  bool
	existing bool // every secret named by the values
	hpa      bool
	monitor  bool
	rotation bool
}

var topologies = []topology{
	{file: "", redis: redisconn.Standalone, rotation: true},
	{file: "standalone-values.yaml", redis: redisconn.Standalone, journal: true, rotation: true},
	{file: "sentinel-values.yaml", redis: redisconn.Sentinel, journal: true, rotation: true},
	{file: "cluster-values.yaml", redis: redisconn.Cluster, journal: true, rotation: true},
	{file: "existing-secrets-values.yaml", redis: redisconn.Standalone, journal: true, existing: true, rotation: true},
	{file: "autoscaling-monitoring-values.yaml", redis: redisconn.Standalone, journal: true, hpa: true, monitor: true},
}

func TestChart(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(chartDir, "ci", "*.yaml"))
	if len(files) != len(topologies)-1 {
		t.Fatalf("ci/ has %d values files, the test knows %d", len(files), len(topologies)-1)
	}
	for _, tp := range topologies {
		name := tp.file
		if name == "" {
			name = "defaults"
		}
		t.Run(name, func(t *testing.T) {
			vals := values(t, tp.file)
			r, err := render(t, vals)
			if err != nil {
				t.Fatal(err)
			}
			checkChart(t, r, tp)
		})
	}
}

func checkChart(t *testing.T, r rendered, tp topology) {
	full := release + "-flashgate"
	secrets := map[string]*corev1.Secret{}
	for _, s := range all[*corev1.Secret](r) {
		secrets[s.Name] = s
	}
	keysSecret := full + "-keys"
	if tp.existing {
		keysSecret = "sale-keys"
		if len(secrets) != 0 {
			t.Errorf("with every secret existing the chart still renders %v", r.names())
		}
	}
	// secretValue is what a secretKeyRef resolves to: a chart Secret's
	// value, or "" for a Secret the values name (existing).
	secretValue := func(ref *corev1.SecretKeySelector) string {
		t.Helper()
		s, ok := secrets[ref.Name]
		if !ok {
			if !tp.existing || !strings.HasPrefix(ref.Name, "sale-") {
				t.Errorf("secretKeyRef %s/%s: no such Secret rendered", ref.Name, ref.Key)
			}
			return ""
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			t.Errorf("secretKeyRef %s/%s: the Secret has no such key", ref.Name, ref.Key)
		}
		return string(v)
	}

	// The issuer.
	iss := get[*appsv1.Deployment](t, r, "Deployment", full+"-issuer")
	pod := iss.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("issuer pod has %d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	if !slices.Equal(c.Args, []string{"serve"}) {
		t.Errorf("issuer args %q", c.Args)
	}
	checkSecurity(t, "issuer", pod, c)
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if env["FLASHGATE_ADDR"].Value != ":8080" || len(c.Ports) != 2 || c.Ports[0].ContainerPort != 8080 || c.Ports[0].Name != "http" {
		t.Errorf("issuer listens on %q, ports %v", env["FLASHGATE_ADDR"].Value, c.Ports)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz/replica" || p.HTTPGet.Port.String() != "http" {
		t.Errorf("issuer readiness probe %+v, want GET /readyz/replica on http", p)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.String() != "http" {
		t.Errorf("issuer liveness probe %+v, want GET /healthz on http", p)
	}
	shutdown, err := time.ParseDuration(env["FLASHGATE_SHUTDOWN_TIMEOUT"].Value)
	if err != nil {
		t.Errorf("FLASHGATE_SHUTDOWN_TIMEOUT: %v", err)
	}
	var preStop time.Duration
	if l := c.Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Sleep != nil {
		preStop = time.Duration(l.PreStop.Sleep.Seconds) * time.Second
	}
	if grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second; grace <= shutdown+preStop || shutdown <= 0 {
		t.Errorf("terminationGracePeriodSeconds %v must exceed preStop %v + FLASHGATE_SHUTDOWN_TIMEOUT %v", grace, preStop, shutdown)
	}
	if ref := env["REDIS_URL"].ValueFrom; ref == nil || ref.SecretKeyRef == nil {
		t.Error("REDIS_URL does not come from a Secret")
	} else if tp.existing {
		if ref.SecretKeyRef.Name != "sale-redis" || ref.SecretKeyRef.Key != "url" {
			t.Errorf("REDIS_URL from %s/%s, want the existing sale-redis/url", ref.SecretKeyRef.Name, ref.SecretKeyRef.Key)
		}
	} else if u := secretValue(ref.SecretKeyRef); u != "" {
		cl, mode, err := redisconn.Open(u)
		if err != nil || mode != tp.redis {
			t.Errorf("REDIS_URL %q opens as %q (%v), want %s", u, mode, err, tp.redis)
		} else {
			_ = cl.Close()
		}
	}
	if ref := env["FLASHGATE_ADMIN_TOKEN"].ValueFrom; ref == nil || ref.SecretKeyRef == nil {
		t.Error("FLASHGATE_ADMIN_TOKEN does not come from a Secret")
	} else if tp.existing && ref.SecretKeyRef.Name != "sale-admin" {
		t.Errorf("admin token from %s, want the existing sale-admin", ref.SecretKeyRef.Name)
	} else if !tp.existing && (ref.SecretKeyRef.Name != keysSecret || ref.SecretKeyRef.Key != "FLASHGATE_ADMIN_TOKEN") {
		t.Errorf("admin token from %s/%s, want the key ring's Secret %s, where the install hook makes it once",
			ref.SecretKeyRef.Name, ref.SecretKeyRef.Key, keysSecret)
	}
	if dsn, ok := env["FLASHGATE_JOURNAL_DSN"]; ok != tp.journal {
		t.Errorf("issuer FLASHGATE_JOURNAL_DSN set %v, want %v", ok, tp.journal)
	} else if ok {
		secretValue(dsn.ValueFrom.SecretKeyRef)
	}
	// The key ring: the Secret mounted whole (so rotations reach the pod),
	// read-only, and FLASHGATE_KEYS_FILE inside it.
	if len(pod.Volumes) < 1 || pod.Volumes[0].Secret == nil || pod.Volumes[0].Secret.SecretName != keysSecret {
		t.Fatalf("issuer volumes %+v, want the key Secret %s", pod.Volumes, keysSecret)
	}
	if m := pod.Volumes[0].Secret.DefaultMode; m == nil || *m&0o007 != 0 {
		t.Errorf("key ring mode %v: keys.Load refuses a file others may read", m)
	}
	if len(c.VolumeMounts) < 1 || !c.VolumeMounts[0].ReadOnly || c.VolumeMounts[0].SubPath != "" ||
		filepath.Dir(env["FLASHGATE_KEYS_FILE"].Value) != c.VolumeMounts[0].MountPath {
		t.Errorf("key ring mount %+v, FLASHGATE_KEYS_FILE %q", c.VolumeMounts, env["FLASHGATE_KEYS_FILE"].Value)
	}
	podLabels := labels.Set(iss.Spec.Template.Labels)
	if sel, _ := metav1.LabelSelectorAsSelector(iss.Spec.Selector); !sel.Matches(podLabels) {
		t.Error("the issuer Deployment's selector does not match its pods")
	}
	if len(pod.TopologySpreadConstraints) == 0 {
		t.Error("no topology spread")
	}
	for _, tsc := range pod.TopologySpreadConstraints {
		if sel, _ := metav1.LabelSelectorAsSelector(tsc.LabelSelector); !sel.Matches(podLabels) || sel.Empty() {
			t.Errorf("topology spread on %s does not select the issuer pods", tsc.TopologyKey)
		}
	}

	svc := get[*corev1.Service](t, r, "Service", full)
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) || svc.Spec.Ports[0].TargetPort.String() != "http" {
		t.Errorf("issuer Service selects %v on %v", svc.Spec.Selector, svc.Spec.Ports)
	}
	pdb := get[*policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget", full+"-issuer")
	if sel, _ := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); !sel.Matches(podLabels) {
		t.Error("the PodDisruptionBudget does not select the issuer pods")
	}
	hpa, hasHPA := r["HorizontalPodAutoscaler/"+full+"-issuer"].(*autoscalingv2.HorizontalPodAutoscaler)
	if hasHPA != tp.hpa {
		t.Errorf("HPA rendered %v, want %v", hasHPA, tp.hpa)
	}
	if hasHPA && (hpa.Spec.ScaleTargetRef.Name != iss.Name || iss.Spec.Replicas != nil) {
		t.Errorf("HPA scales %q; the Deployment sets replicas %v (it would fight the HPA)", hpa.Spec.ScaleTargetRef.Name, iss.Spec.Replicas)
	}
	np := get[*networkingv1.NetworkPolicy](t, r, "NetworkPolicy", full+"-issuer")
	if sel, _ := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); !sel.Matches(podLabels) {
		t.Error("the issuer NetworkPolicy does not select the issuer pods")
	}

	// The journal process.
	jr, hasJournal := r["Deployment/"+full+"-journal"].(*appsv1.Deployment)
	if hasJournal != tp.journal {
		t.Fatalf("journal Deployment rendered %v, want %v", hasJournal, tp.journal)
	}
	if hasJournal {
		jp := jr.Spec.Template.Spec
		jc := jp.Containers[0]
		checkSecurity(t, "journal", jp, jc)
		if !slices.Equal(jc.Args, []string{"journal", "run"}) {
			t.Errorf("journal args %q", jc.Args)
		}
		if p := jc.LivenessProbe; p == nil || p.HTTPGet.Path != "/healthz" {
			t.Errorf("journal liveness %+v", p)
		}
		jenv := map[string]corev1.EnvVar{}
		for _, e := range jc.Env {
			jenv[e.Name] = e
		}
		for _, v := range []string{"REDIS_URL", "FLASHGATE_JOURNAL_DSN"} {
			if e, ok := jenv[v]; !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				t.Errorf("journal %s not from a Secret", v)
			} else {
				secretValue(e.ValueFrom.SecretKeyRef)
			}
		}
		if jenv["FLASHGATE_JOURNAL_LISTEN"].Value != ":9091" {
			t.Errorf("journal listens on %q: loopback would hide /metrics and the probes", jenv["FLASHGATE_JOURNAL_LISTEN"].Value)
		}
		get[*corev1.Service](t, r, "Service", full+"-journal")
	}

	// Keys: the hook that creates the ring unless it exists, the rotation
	// CronJob, each with a ServiceAccount that may touch that Secret only.
	job, hasInit := r["Job/"+full+"-keys-init"].(*batchv1.Job)
	if hasInit == tp.existing {
		t.Errorf("keys-init Job rendered %v with existing secrets %v", hasInit, tp.existing)
	}
	if hasInit {
		checkKeysPod(t, r, job.Spec.Template.Spec, "generate", keysSecret, true)
		// The lottery key (issue 36): made once by the hook beside the ring,
		// so every replica derives the same lottery secrets.
		if a := job.Spec.Template.Spec.Containers[0].Args; !slices.Contains(a, "-lottery-key-key") || !slices.Contains(a, "FLASHGATE_LOTTERY_KEY") {
			t.Errorf("keys-init args %q do not keep a lottery key (-lottery-key-key FLASHGATE_LOTTERY_KEY)", a)
		}
	}
	if ref := env["FLASHGATE_LOTTERY_KEY"].ValueFrom; ref == nil || ref.SecretKeyRef == nil ||
		ref.SecretKeyRef.Name != keysSecret || ref.SecretKeyRef.Key != "FLASHGATE_LOTTERY_KEY" {
		t.Errorf("issuer FLASHGATE_LOTTERY_KEY %+v, want the key ring's Secret %s/FLASHGATE_LOTTERY_KEY: without it each replica draws with its own key", ref, keysSecret)
	}
	cj, hasCron := r["CronJob/"+full+"-keys-rotate"].(*batchv1.CronJob)
	if hasCron != tp.rotation {
		t.Errorf("rotation CronJob rendered %v, want %v", hasCron, tp.rotation)
	}
	if hasCron {
		checkKeysPod(t, r, cj.Spec.JobTemplate.Spec.Template.Spec, "rotate", keysSecret, false)
		if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
			t.Error("two rotations at once")
		}
	}

	// Monitoring.
	sm, hasSM := r["ServiceMonitor/"+full].(*monitoringv1.ServiceMonitor)
	pr, hasPR := r["PrometheusRule/"+full].(*monitoringv1.PrometheusRule)
	if hasSM != tp.monitor || hasPR != tp.monitor {
		t.Errorf("ServiceMonitor %v PrometheusRule %v, want %v", hasSM, hasPR, tp.monitor)
	}
	if hasSM {
		ports := map[string]bool{}
		for _, s := range all[*corev1.Service](r) {
			if sel, _ := metav1.LabelSelectorAsSelector(&sm.Spec.Selector); sel.Matches(labels.Set(s.Labels)) {
				for _, p := range s.Spec.Ports {
					ports[p.Name] = true
				}
			}
		}
		for _, e := range sm.Spec.Endpoints {
			if !ports[e.Port] || e.Path != "/metrics" {
				t.Errorf("ServiceMonitor endpoint %s%s: no selected Service has that port (%v)", e.Port, e.Path, ports)
			}
		}
	}
	if hasPR {
		var want monitoringv1.PrometheusRuleSpec
		data, err := os.ReadFile("prometheus/alerts.yml")
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(data, &want); err != nil {
			t.Fatal(err)
		}
		if len(want.Groups) == 0 || !reflect.DeepEqual(pr.Spec, want) {
			t.Errorf("the PrometheusRule's groups are not deploy/prometheus/alerts.yml's")
		}
	}
	cm := get[*corev1.ConfigMap](t, r, "ConfigMap", full+"-dashboard")
	dash, err := os.ReadFile("grafana/flashgate.json")
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["flashgate.json"] != strings.TrimRight(string(dash), "\n") || cm.Labels["grafana_dashboard"] != "1" {
		t.Error("the dashboard ConfigMap does not hold deploy/grafana/flashgate.json (with the sidecar's label)")
	}
}

// checkSecurity asserts a pod and its container run as the image's non-root
// user, read-only, without privileges.
func checkSecurity(t *testing.T, what string, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	ps, cs := pod.SecurityContext, c.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser != 65532 ||
		ps.FSGroup == nil || *ps.FSGroup != 65532 {
		t.Errorf("%s pod securityContext %+v: want non-root 65532 (the image's user) and its fsGroup", what, ps)
	}
	if cs == nil || cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation ||
		cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem ||
		cs.Capabilities == nil || !slices.Equal(cs.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("%s container securityContext %+v", what, cs)
	}
}

// checkKeysPod asserts a key Job's pod runs `flashgate keys VERB
// -kubernetes-secret SECRET` as a ServiceAccount bound to a Role that may
// get and update that Secret only (and create Secrets when create).
func checkKeysPod(t *testing.T, r rendered, pod corev1.PodSpec, verb, secret string, create bool) {
	t.Helper()
	c := pod.Containers[0]
	checkSecurity(t, "keys "+verb, pod, c)
	if len(c.Args) < 4 || c.Args[0] != "keys" || c.Args[1] != verb || c.Args[2] != "-kubernetes-secret" || c.Args[3] != secret {
		t.Errorf("keys %s args %q, want keys %s -kubernetes-secret %s", verb, c.Args, verb, secret)
	}
	rb := get[*rbacv1.RoleBinding](t, r, "RoleBinding", pod.ServiceAccountName)
	get[*corev1.ServiceAccount](t, r, "ServiceAccount", pod.ServiceAccountName)
	if len(rb.Subjects) != 1 || rb.Subjects[0].Name != pod.ServiceAccountName || rb.Subjects[0].Namespace != namespace {
		t.Errorf("RoleBinding %s binds %+v", rb.Name, rb.Subjects)
	}
	role := get[*rbacv1.Role](t, r, "Role", rb.RoleRef.Name)
	var verbs []string
	for _, rule := range role.Rules {
		if !slices.Equal(rule.Resources, []string{"secrets"}) {
			t.Errorf("Role %s grants %v", role.Name, rule.Resources)
		}
		if slices.Contains(rule.Verbs, "create") {
			verbs = append(verbs, "create")
			continue
		}
		if !slices.Equal(rule.ResourceNames, []string{secret}) {
			t.Errorf("Role %s: %v on %v, want only %s", role.Name, rule.Verbs, rule.ResourceNames, secret)
		}
		verbs = append(verbs, rule.Verbs...)
	}
	sort.Strings(verbs)
	want := []string{"get", "update"}
	if create {
		want = []string{"create", "get", "update"}
	}
	if !slices.Equal(verbs, want) {
		t.Errorf("Role %s verbs %v, want %v", role.Name, verbs, want)
	}
}

// TestChartFilesAreDeploys: the chart carries copies of the alert rules and
// the dashboard (Helm reads no file outside the chart); they must be
// deploy/prometheus's and deploy/grafana's byte for byte.
func TestChartFilesAreDeploys(t *testing.T) {
	for copyName, orig := range map[string]string{
		"files/alerts.yml":     "prometheus/alerts.yml",
		"files/flashgate.json": "grafana/flashgate.json",
	} {
		a, err := os.ReadFile(filepath.Join(chartDir, copyName))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(orig)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s/%s differs from deploy/%s: cp deploy/%s deploy/%s/%s", chartDir, copyName, orig, orig, chartDir, copyName)
		}
	}
}

// TestChartRefusesAShortGracePeriod: a grace period the drain does not fit
// in fails the render instead of killing draining pods.
func TestChartRefusesAShortGracePeriod(t *testing.T) {
	_, err := render(t, map[string]any{"issuer": map[string]any{
		"terminationGracePeriodSeconds": 20, "shutdownTimeoutSeconds": 15, "preStopSleepSeconds": 5}})
	if err == nil || !strings.Contains(err.Error(), "must exceed preStopSleepSeconds + shutdownTimeoutSeconds") {
		t.Fatalf("render: %v", err)
	}
}

// TestChartNeedsARedis: no Redis URL and no existing Secret is a clear error.
func TestChartNeedsARedis(t *testing.T) {
	_, err := render(t, map[string]any{"redis": map[string]any{"url": ""}})
	if err == nil || !strings.Contains(err.Error(), "flashgate bundles no Redis") {
		t.Fatalf("render: %v", err)
	}
}
