package worker_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/workerdtest"
)

// The origin matrix (issue 31 §1): the path table through worker.js in
// workerd in front of real origins that flashgate did not write. Each origin
// serves one protected route, /products/<product>/…, and a public one, and
// answers with what it served ("product <product>" or "public") and the
// X-Flashgate-Product header it got (X-Origin-Verified) and, where the
// server exposes it, the request target it got (X-Origin-Target).

// originProducts are the products the nginx origin has pages for (the
// routing origins serve any product segment).
var originProducts = []string{"sku-1", "sku-2", "sneakers", "SKU-2", "café", "sku-2~_.1", "a+b"}

// shopOrigin is one origin of the matrix: its name and base URL.
type shopOrigin struct {
	name string
	addr string // host:port on loopback
}

// goShop answers like the other origins: served is "" for the public route.
func goShop(w http.ResponseWriter, r *http.Request, served string) {
	w.Header().Set("X-Origin-Target", r.RequestURI)
	w.Header().Set("X-Origin-Verified", r.Header.Get("X-Flashgate-Product"))
	w.Header().Set("Content-Type", "text/plain")
	if served == "" {
		_, _ = io.WriteString(w, "public\n")
		return
	}
	_, _ = io.WriteString(w, "product "+served+"\n")
}

// goOrigins starts the three Go origins: a Go 1.22 ServeMux (cleans the
// path, redirecting an unclean one, and routes on the escaped segments), a
// handler routing on r.URL.EscapedPath() split at "/" as received (%2F kept
// as data, no cleaning: what a router on RawPath does), and one routing on
// r.URL.Path split at "/" (decoded, %2F included, no cleaning).
func goOrigins(t *testing.T) []shopOrigin {
	mux := http.NewServeMux()
	product := func(w http.ResponseWriter, r *http.Request) { goShop(w, r, r.PathValue("product")) }
	mux.HandleFunc("GET /products/{product}", product)
	mux.HandleFunc("GET /products/{product}/", product)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { goShop(w, r, "") })

	split := func(path string, unescape bool) string {
		segs := strings.Split(path, "/")
		if len(segs) < 3 || segs[0] != "" || segs[1] != "products" || segs[2] == "" {
			return ""
		}
		if !unescape {
			return segs[2]
		}
		p, err := url.PathUnescape(segs[2])
		if err != nil {
			return ""
		}
		return p
	}
	raw := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		goShop(w, r, split(r.URL.EscapedPath(), true))
	})
	decoded := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		goShop(w, r, split(r.URL.Path, false))
	})
	var out []shopOrigin
	for _, o := range []struct {
		name string
		h    http.Handler
	}{{"go-servemux", mux}, {"go-rawpath", raw}, {"go-path", decoded}} {
		srv := httptest.NewServer(o.h)
		t.Cleanup(srv.Close)
		out = append(out, shopOrigin{o.name, strings.TrimPrefix(srv.URL, "http://")})
	}
	return out
}

// listeningProcess starts cmd (a server that binds 127.0.0.1 port 0 and
// prints "listening <port>" first) and returns its address; it is killed at
// t's cleanup, and what it wrote to stderr is printed if t failed.
func listeningProcess(t *testing.T, name string, cmd *exec.Cmd) string {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start(), "%s: %s", name, cmd.Path)
	exited := make(chan struct{})
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		if s.Scan() {
			line <- s.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("%s stderr:\n%s", name, stderr.String())
		}
	})
	select {
	case l := <-line:
		port, ok := strings.CutPrefix(l, "listening ")
		require.True(t, ok, "%s printed %q, not listening <port>", name, l)
		return "127.0.0.1:" + port
	case <-exited:
		t.Fatalf("%s exited during start-up:\n%s", name, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not start within 30 s:\n%s", name, stderr.String())
	}
	return ""
}

// debianPython is Debian's python3 (apt's python3-flask and python3-django
// are installed for it, not for another python3 on PATH).
const debianPython = "/usr/bin/python3"

// processOrigins starts Express (npm, testdata/origins/express), Flask and
// Django (Debian's packages) and nginx (Debian's) serving static product
// pages, each one process for the whole matrix.
func processOrigins(t *testing.T) []shopOrigin {
	dir, err := filepath.Abs(filepath.Join("testdata", "origins"))
	require.NoError(t, err)
	need := func(what, path, install string) {
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("%s is not installed (%v): %s (`make test` does)", what, err, install)
		}
	}
	need("Express", filepath.Join(dir, "express", "node_modules", "express"), "run `npm ci` in examples/cloudflare-worker/testdata/origins/express")
	need("Debian's python3", debianPython, "run scripts/install-origins.sh")
	node, err := exec.LookPath("node")
	require.NoError(t, err, "node is not installed")

	express := exec.Command(node, "server.js")
	express.Dir = filepath.Join(dir, "express")
	flask := exec.Command(debianPython, filepath.Join(dir, "flask_origin.py"))
	django := exec.Command(debianPython, filepath.Join(dir, "django_origin.py"))
	return []shopOrigin{
		{"express", listeningProcess(t, "express", express)},
		{"flask", listeningProcess(t, "flask", flask)},
		{"django", listeningProcess(t, "django", django)},
		{"nginx", nginxOrigin(t)},
	}
}

// nginxBinary is Debian's nginx.
const nginxBinary = "/usr/sbin/nginx"

// nginxOrigin runs nginx (one process: no master) serving static pages:
// products/<product>/index.html and …/buy holding "product <product>",
// about and index.html holding "public". nginx decodes the path (%2F too),
// merges slashes and removes dot segments before it looks for the file.
func nginxOrigin(t *testing.T) string {
	if _, err := os.Stat(nginxBinary); err != nil {
		t.Fatalf("nginx is not installed (%v): run scripts/install-origins.sh (`make test` does)", err)
	}
	dir := t.TempDir()
	www := filepath.Join(dir, "www")
	write := func(rel, text string) {
		p := filepath.Join(www, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	}
	for _, p := range originProducts {
		write(filepath.Join("products", p, "index.html"), "product "+p+"\n")
		write(filepath.Join("products", p, "buy"), "product "+p+"\n")
	}
	write("index.html", "public\n")
	write("about", "public\n")
	write("files/a/b", "public\n")

	// nginx cannot report a port it chose: take a free one (the race with
	// another process taking it before nginx binds it is a start-up failure).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 512; }
http {
  access_log off;
  default_type text/plain;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  server {
    listen %[2]s;
    root %[1]s/www;
    add_header X-Origin-Target $request_uri always;
    add_header X-Origin-Verified $http_x_flashgate_product always;
    log_not_found off;
    location / { index index.html; }
  }
}
`, dir, addr)
	confPath := filepath.Join(dir, "nginx.conf")
	require.NoError(t, os.WriteFile(confPath, []byte(conf), 0o644))
	cmd := exec.Command(nginxBinary, "-c", confPath, "-p", dir, "-e", filepath.Join(dir, "error.log"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("nginx output:\n%s\nerror.log:\n%s", out.String(), b)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited during start-up:\n%s\n%s", out.String(), b)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not listen on %s within 30 s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// matrixWorkerd runs one workerd with worker.js once per origin (each its
// own ORIGIN binding and socket) and returns each origin's edge base URL.
// FLASHGATE_TEST_WORKER_JS names another worker.js to run instead (the
// worker at an older commit, to measure what it let through).
func matrixWorkerd(t *testing.T, issuerAddr string, origins []shopOrigin) map[string]string {
	bin := workerdBinary(t)
	wasm := wasmModule(t)
	dir := t.TempDir()
	script := "worker.js"
	if s := os.Getenv("FLASHGATE_TEST_WORKER_JS"); s != "" {
		script = s
		t.Logf("FLASHGATE_TEST_WORKER_JS: running %s, not this folder's worker.js", s)
	}
	workerdtest.CopyFile(t, script, filepath.Join(dir, "worker.js"))
	workerdtest.CopyFile(t, wasm, filepath.Join(dir, "flashgate-verifier.wasm"))
	workerdtest.Package(t, dir)

	var b strings.Builder
	b.WriteString(`using Workerd = import "/workerd/workerd.capnp";
const modules :List(Workerd.Worker.Module) = [
  (name = "worker.js", esModule = embed "worker.js"),
  (name = "flashgate-verifier", esModule = embed "node_modules/flashgate-verifier/index.js"),
  (name = "flashgate-verifier/flashgate-verifier.wasm", wasm = embed "flashgate-verifier.wasm"),
];
const config :Workerd.Config = (
  services = [
    (name = "issuer", external = (address = "${ISSUER_ADDR}", http = ())),
`)
	lns := map[string]net.Listener{}
	for _, o := range origins {
		fmt.Fprintf(&b, `    (name = "origin-%[1]s", external = (address = %[2]q, http = ())),
    (name = "edge-%[1]s", worker = (modules = .modules, compatibilityDate = "2026-10-01", bindings = [
      (name = "FLASHGATE_JWKS_URL", text = "http://issuer/.well-known/jwks.json"),
      (name = "FLASHGATE_MAX_LIFETIME_SECONDS", text = "900"),
      (name = "FLASHGATE_PRODUCT_PREFIX", text = "/products/"),
      (name = "ISSUER", service = "issuer"),
      (name = "ORIGIN", service = "origin-%[1]s"),
    ])),
`, o.name, o.addr)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns[o.name] = ln
	}
	b.WriteString("  ],\n  sockets = [\n")
	for i, o := range origins {
		sep := ","
		if i == len(origins)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "    (name = %q, address = \"127.0.0.1:0\", http = (), service = \"edge-%s\")%s\n", o.name, o.name, sep)
	}
	b.WriteString("  ],\n);\n")
	tmpl := filepath.Join(dir, "matrix.capnp.tmpl")
	require.NoError(t, os.WriteFile(tmpl, []byte(b.String()), 0o644))
	return workerdtest.LaunchSockets(t, bin, dir, tmpl, map[string]string{"ISSUER_ADDR": issuerAddr}, lns,
		origins[0].name, "/products/")
}

// generatedSpellings returns n walks built from the pieces the table's
// spellings are made of (a start inside or outside the prefix, one to three
// steps of an encoded dot-dot and an encoded separator, a target), drawn
// with a fixed seed: the same n spellings every run. Their row is want
// "any": only the matrix's rule applies (no product served unverified).
func generatedSpellings(n int) []pathCase {
	starts := []string{"/products/sneakers/", "/products/sku-1/", "/PRODUCTS/sku-1/", "/about/", "/", "/products/sku-2/x/",
		"/%70roducts/sku-1/", "/products%2Fsku-1/"}
	dots := []string{"..", "%2e%2e", "%2E%2E", ".%2e", "%2e.", "%252e%252e", "%c0%ae%c0%ae", "..;", "%EF%BC%8E%EF%BC%8E", "."}
	seps := []string{"/", "%2F", "%2f", "%5C", "%5c", "\\", "%252F", "%c0%af", "%EF%BC%8F", "//", ";/", "%00/"}
	targets := []string{"about", "products/sku-2/", "products%2Fsku-2", "sku-2/", "PRODUCTS/sku-2/buy", "sneakers/",
		"products/sneakers", "%70roducts/sku-2/", ""}
	r := rand.New(rand.NewPCG(31, 1))
	pick := func(from []string) string { return from[r.IntN(len(from))] }
	seen := map[string]bool{}
	var out []pathCase
	for len(out) < n {
		var b strings.Builder
		b.WriteString(pick(starts))
		for k := r.IntN(3); k >= 0; k-- {
			b.WriteString(pick(dots))
			b.WriteString(pick(seps))
		}
		b.WriteString(pick(targets))
		if p := b.String(); !seen[p] {
			seen[p] = true
			out = append(out, pathCase{Name: fmt.Sprintf("generated %d", len(out)), Path: p, Want: "any"})
		}
	}
	return out
}

// matrixAnswer is what one request through the edge came back with.
type matrixAnswer struct {
	status   int
	problem  string // the worker's problem reason ("" when the origin answered)
	served   string // the product the origin served, "" for none
	verified string // X-Flashgate-Product as the origin got it
	target   string // the request target as the origin got it ("" when it does not say)
	err      error
}

// sendRaw sends GET target to base (host:port) byte for byte.
func sendRaw(addr, target string, header map[string]string) matrixAnswer {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return matrixAnswer{err: err}
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: edge.test\r\nConnection: close\r\n", target)
	for k, v := range header {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return matrixAnswer{err: err}
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return matrixAnswer{err: err}
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return matrixAnswer{err: err}
	}
	a := matrixAnswer{status: resp.StatusCode, verified: resp.Header.Get("X-Origin-Verified"),
		target: resp.Header.Get("X-Origin-Target")}
	if resp.Header.Get("Content-Type") == "application/problem+json" {
		var p struct {
			Reason string `json:"reason"`
		}
		if json.Unmarshal(body, &p) != nil || p.Reason == "" {
			p.Reason = "?"
		}
		a.problem = p.Reason
	} else if s, ok := strings.CutPrefix(string(body), "product "); ok {
		a.served = strings.TrimSuffix(s, "\n")
	}
	return a
}

// TestWorkerOriginMatrix sends every spelling of testdata/paths.json through
// worker.js in workerd to each real origin — Go ServeMux, Go handlers on the
// raw and on the decoded path, Express, Flask/Werkzeug, Django and nginx —
// once without a token and once with a valid token (for the row's product,
// else sku-2), and requires:
//   - on every origin, whatever the row: a product the origin served is the
//     product the worker verified (no spelling reaches a product unverified);
//   - the row's answer: verified and forwarded as its canonical path, refused
//     400 ambiguous_path or invalid_target, 404 unknown_route, or passed
//     unverified as its canonical path — the very target every origin got.
//
// 240 generated walks (generatedSpellings) follow the table, under the rule
// only. On 4dbe417's worker (FLASHGATE_TEST_WORKER_JS) it reports how many
// spellings reached a product unverified, per origin.
func TestWorkerOriginMatrix(t *testing.T) {
	table := loadPathCases(t)
	cases := append(table, generatedSpellings(240)...)
	ring, jwks := pathRing(t)
	issuerSrv := stubIssuer(t, jwks, "")
	origins := append(goOrigins(t), processOrigins(t)...)
	edges := matrixWorkerd(t, strings.TrimPrefix(issuerSrv.URL, "http://"), origins)

	type job struct {
		origin    string
		c         int // index into cases
		withToken bool
	}
	tokens := make([]string, len(cases))
	for i, c := range cases {
		tokens[i] = c.token(t, ring)
	}
	var jobs []job
	for _, o := range origins {
		for i := range cases {
			jobs = append(jobs, job{o.name, i, false}, job{o.name, i, true})
		}
	}
	answers := make([]matrixAnswer, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < 12; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := jobs[i]
				hdr := map[string]string{"Accept": acceptJSON}
				if j.withToken {
					hdr["Authorization"] = "Bearer " + tokens[j.c]
				}
				answers[i] = sendRaw(strings.TrimPrefix(edges[j.origin], "http://"), cases[j.c].Path, hdr)
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()

	leaked := map[string]map[string]bool{} // origin → spellings that reached a product unverified
	wrong := map[string]int{}              // origin → answers unlike the row's
	shown := map[string]int{}
	report := func(kind, origin, format string, args ...any) {
		if shown[kind+origin] < 8 {
			t.Errorf("%s: "+format, append([]any{origin}, args...)...)
		}
		shown[kind+origin]++
	}
	for i, j := range jobs {
		c, a := cases[j.c], answers[i]
		what := fmt.Sprintf("%s %q (token %v): %+v", c.Name, c.Path, j.withToken, a)
		if a.err != nil {
			report("err", j.origin, "%s: %v", what, a.err)
			wrong[j.origin]++
			continue
		}
		// The rule, whatever the row: no product served unverified.
		if a.served != "" && a.verified != a.served {
			if leaked[j.origin] == nil {
				leaked[j.origin] = map[string]bool{}
			}
			leaked[j.origin][c.Name] = true
			report("leak", j.origin, "served product %q, the worker verified %q: %s", a.served, a.verified, what)
		}
		reached := a.problem == ""
		ok := true
		switch {
		case c.Want == "any":
		case c.Want == "refuse":
			ok = a.status == http.StatusBadRequest && a.problem == "ambiguous_path"
		case c.Want == "invalid":
			ok = a.status == http.StatusBadRequest && a.problem == "invalid_target"
		case c.Want == "no-product":
			ok = a.status == http.StatusNotFound && a.problem == "unknown_route"
		case c.Want == "verify" && !j.withToken:
			ok = a.status == http.StatusUnauthorized && a.problem == "missing"
		case c.Want == "verify":
			ok = reached && a.verified == c.Product && (a.target == "" || a.target == c.Forward)
		case c.Want == "pass":
			ok = reached && a.verified == "" && a.served == "" && (a.target == "" || a.target == c.Forward)
		default:
			t.Fatalf("unknown want %q", c.Want)
		}
		if !ok {
			wrong[j.origin]++
			report("want", j.origin, "want %s (forward %q): %s", c.Want, c.Forward, what)
		}
	}
	names := make([]string, 0, len(origins))
	for _, o := range origins {
		names = append(names, o.name)
	}
	sort.Strings(names)
	total := 0
	for _, n := range names {
		total += len(leaked[n])
		t.Logf("%-12s %3d of %d spellings reached a product unverified; %3d of %d answers unlike the table",
			n, len(leaked[n]), len(cases), wrong[n], 2*len(cases))
		if len(leaked[n]) > 0 {
			var rows []string
			for name := range leaked[n] {
				rows = append(rows, name)
			}
			sort.Strings(rows)
			t.Logf("%-12s reached unverified: %s", n, strings.Join(rows, "; "))
		}
	}
	t.Logf("%d spellings (%d of the table, %d generated) × %d origins × {no token, token}: %s spelling-origin pairs reached a product unverified",
		len(cases), len(table), len(cases)-len(table), len(origins), strconv.Itoa(total))
}
