// Command demo runs the whole flashgate stack on loopback for a person
// with a browser (`make demo`): the issuer (build/flashgate serve, in
// visitor mode, embedded Redis unless REDIS_URL is set), the Cloudflare
// Worker in workerd with the wasm verifier, a small shop origin behind it,
// and a crowd of buyers ahead of you who are served a few at a time (and
// line up again after buying). It
// prints the URL of a product page: open it, and the worker sends you to
// the waiting page, where you watch your place fall until it is your turn.
//
// Flags: -crowd (buyers ahead, 20), -capacity (2), -think (how long each
// buyer takes to buy, 3s), -issuer, -worker, -shop (loopback addresses).
package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"io"
	"log"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

const adminToken = "demo-admin-token-of-at-least-32-bytes"

func main() {
	crowd := flag.Int("crowd", 20, "buyers in line ahead of you")
	capacity := flag.Int("capacity", 2, "buyers in the shop at once")
	think := flag.Duration("think", 3*time.Second, "how long each buyer of the crowd takes to buy")
	issuerAddr := flag.String("issuer", "127.0.0.1:8080", "issuer listen address")
	workerAddr := flag.String("worker", "127.0.0.1:8787", "worker (the shop's edge) listen address")
	shopAddr := flag.String("shop", "127.0.0.1:9090", "shop origin listen address")
	bin := flag.String("flashgate", "build/flashgate", "the flashgate binary")
	wasm := flag.String("wasm", "build/flashgate-verifier.wasm", "the wasm verifier")
	flag.Parse()
	log.SetFlags(log.Ltime)

	dir, err := os.MkdirTemp("", "flashgate-demo-")
	check(err)
	var procs []*exec.Cmd
	stop := func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
			_ = p.Wait()
		}
		_ = os.RemoveAll(dir)
	}
	fail := func(format string, a ...any) {
		stop()
		log.Fatalf(format, a...)
	}

	// The shop origin.
	go func() {
		err := http.ListenAndServe(*shopAddr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/favicon.ico" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Shop</title></head>
<body style="font-family:sans-serif;margin:3rem"><h1>The shop: %s</h1>
<p>You are in: the edge worker verified your admission cookie.</p><p>Shopper <code>%s</code></p></body></html>`,
				html.EscapeString(r.URL.Path), html.EscapeString(r.Header.Get("X-Flashgate-User")))
		}))
		log.Fatalf("shop: %v", err)
	}()

	// The issuer, in visitor mode; the worker's origin is its return origin.
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	issuerBase, workerBase := "http://"+*issuerAddr, "http://"+*workerAddr
	is := exec.Command(*bin, "serve")
	is.Env = append(os.Environ(), "FLASHGATE_ADDR="+*issuerAddr, "FLASHGATE_KEYS_FILE="+filepath.Join(dir, "keys.json"),
		"FLASHGATE_ADMIN_TOKEN="+adminToken, "FLASHGATE_IDENTITY=visitor",
		"FLASHGATE_VISITOR_KEY="+base64.StdEncoding.EncodeToString(key), "FLASHGATE_INSECURE_COOKIES=true",
		"FLASHGATE_RETURN_ORIGINS="+workerBase, "FLASHGATE_LOG_LEVEL=error")
	is.Stdout, is.Stderr = os.Stderr, os.Stderr
	check(is.Start())
	procs = append(procs, is)
	if !ready(issuerBase+"/readyz", http.StatusOK) {
		fail("the issuer did not become ready at %s", issuerBase)
	}

	// The worker in workerd.
	wdir := filepath.Join("examples", "cloudflare-worker")
	arch := map[string]string{"amd64": "64", "arm64": "arm64"}[runtime.GOARCH]
	workerd, _ := filepath.Abs(filepath.Join(wdir, "node_modules", "@cloudflare", "workerd-"+runtime.GOOS+"-"+arch, "bin", "workerd"))
	copyFile(filepath.Join(wdir, "worker.js"), filepath.Join(dir, "worker.js"))
	copyFile(*wasm, filepath.Join(dir, "flashgate-verifier.wasm"))
	// The flashgate-verifier package, where the config embeds it (as npm installs it).
	check(os.MkdirAll(filepath.Join(dir, "node_modules", "flashgate-verifier"), 0o755))
	copyFile(filepath.Join("js", "flashgate-verifier", "index.js"), filepath.Join(dir, "node_modules", "flashgate-verifier", "index.js"))
	tmpl, err := os.ReadFile(filepath.Join(wdir, "config.capnp.tmpl"))
	check(err)
	port := (*workerAddr)[strings.LastIndex(*workerAddr, ":")+1:]
	vars := map[string]string{"PORT": port, "ISSUER_ADDR": *issuerAddr, "ORIGIN_ADDR": *shopAddr,
		"JWKS_TTL_SECONDS": "300", "WAITING_ROOM_URL": issuerBase + "/wait"}
	cfg := filepath.Join(dir, "config.capnp")
	check(os.WriteFile(cfg, []byte(os.Expand(string(tmpl), func(k string) string { return vars[k] })), 0o644))
	wd := exec.Command(workerd, "serve", cfg)
	wd.Dir = dir
	wd.Stdout, wd.Stderr = os.Stderr, os.Stderr
	if err := wd.Start(); err != nil {
		fail("workerd: %v (run `make worker-deps`)", err)
	}
	procs = append(procs, wd)
	if !ready(workerBase+"/products/", http.StatusNotFound) {
		fail("workerd did not answer at %s", workerBase)
	}

	// The room and the crowd ahead.
	room := "sneakers"
	body := fmt.Sprintf(`{"capacity":%d,"rate_per_minute":600,"session_ms":120000,"tick_ms":250,"state":"open"}`, *capacity)
	req, _ := http.NewRequest(http.MethodPut, issuerBase+"/admin/rooms/"+room, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode >= 300 {
		fail("create room: %v %v", err, resp)
	}
	_ = resp.Body.Close()
	for i := range *crowd {
		b := newBuyer(issuerBase, room)
		if err := b.enter(); err != nil {
			fail("crowd: %v", err)
		}
		go b.shop(*think, i)
	}

	fmt.Printf("\nflashgate demo: %d buyers are in line ahead of you (%d in the shop at a time).\n\n", *crowd, *capacity)
	fmt.Printf("  open  %s/products/%s/red-42\n\n", workerBase, room)
	fmt.Printf("issuer %s · worker %s · shop http://%s · admin token %q · Ctrl-C stops\n", issuerBase, workerBase, *shopAddr, adminToken)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	stop()
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

func ready(u string, status int) bool {
	c := &http.Client{Timeout: time.Second}
	for range 300 {
		if r, err := c.Get(u); err == nil {
			_ = r.Body.Close()
			if r.StatusCode == status {
				return true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

func copyFile(from, to string) {
	b, err := os.ReadFile(from)
	check(err)
	check(os.WriteFile(to, b, 0o644))
}

// buyer is one of the crowd: its own cookie jar, so its own visitor.
type buyer struct {
	base, room, token string
	hc                *http.Client
}

func newBuyer(base, room string) *buyer {
	jar, _ := cookiejar.New(nil)
	return &buyer{base: base, room: room, hc: &http.Client{Jar: jar, Timeout: 5 * time.Second}}
}

func (b *buyer) call(method, path, bearer string) (map[string]any, error) {
	req, _ := http.NewRequest(method, b.base+path, nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	if resp.StatusCode != http.StatusOK {
		return m, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, body)
	}
	return m, nil
}

func (b *buyer) enter() error {
	m, err := b.call(http.MethodPost, "/v1/rooms/"+b.room+"/enter", "")
	if err == nil {
		b.token, _ = m["waiting_token"].(string)
	}
	return err
}

// shop waits for the buyer's turn, takes think to buy, then completes the
// order, which lets the next in line in, and lines up again: the line
// never runs dry, however late you open the page.
func (b *buyer) shop(think time.Duration, i int) {
	for {
		b.buy(think, i)
		time.Sleep(think)
		for b.enter() != nil {
			time.Sleep(time.Second)
		}
	}
}

func (b *buyer) buy(think time.Duration, i int) {
	for {
		m, err := b.call(http.MethodGet, "/v1/rooms/"+b.room+"/status", b.token)
		if err == nil && m["state"] == "ACTIVE" {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(think)
	m, err := b.call(http.MethodPost, "/v1/rooms/"+b.room+"/exchange", b.token)
	if err != nil {
		log.Printf("buyer %d: %v", i, err)
		return
	}
	tok, _ := m["admission_token"].(string)
	if _, err := b.call(http.MethodPost, "/v1/complete?room="+b.room, tok); err != nil {
		log.Printf("buyer %d: %v", i, err)
		return
	}
	log.Printf("buyer %d of the crowd bought and lines up again", i+1)
}
