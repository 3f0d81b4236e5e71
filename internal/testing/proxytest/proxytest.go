// Package proxytest runs real reverse proxies — Debian's nginx and HAProxy
// (scripts/install-proxies.sh) — on loopback in front of a test's server,
// each appending the client address the way it does in production, and
// sends requests through them from loopback client addresses of the test's
// choosing (127.0.0.0/8 and ::1), with raw header lines: the proxy matrix
// of issue 31 (hostile X-Forwarded-For and Forwarded headers).
package proxytest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The proxies' binaries (Debian's packages).
const (
	NginxBin   = "/usr/sbin/nginx"
	HAProxyBin = "/usr/sbin/haproxy"
)

// Proxy kinds of a Front.
const (
	Nginx   = "nginx"
	HAProxy = "haproxy"
)

// HostileHeaders are header lines a client sends through a proxy, one case
// each (raw: several lines, any bytes a proxy passes on), the first none.
var HostileHeaders = [][]string{
	nil,                     // none: the baseline
	{`X-Forwarded-For: 1"`}, // issue 31: the quote that hid the proxy's entry
	{`X-Forwarded-For: "1.1.1.1, 2.2.2.2`},
	{`X-Forwarded-For: 1"`, `X-Forwarded-For: 5.5.5.5"`},
	{`X-Forwarded-For: 127.0.0.1`}, // naming the trusted proxy
	{`X-Forwarded-For: 198.51.100.9, 127.0.0.1`},
	{`X-Forwarded-For: 198.51.100.9`},
	{`X-Forwarded-For: ,,,`},
	{`X-Forwarded-For: garbage\`},
	{`x-forwarded-for: unknown`},
	{`X-Forwarded-For: [2001:db8::1]:80, 198.51.100.9:443`},
	{`X-Forwarded-For: for="_hidden"`},
	{"X-Forwarded-For: \xff\xfe1\"\t"},
	{`X-Forwarded-For: ` + strings.Repeat("1.1.1.1,", 400) + `"`},
	{`Forwarded: for="x`},
	{`Forwarded: for=1.1.1.1;by="`},
	{`Forwarded: for="[2001:db8::1]:80"`},
	{`Forwarded: for=_hidden, for=unknown`},
	{`Forwarded: for=127.0.0.1`},
	{`Forwarded: for="1.1.1.1\", for=2.2.2.2`},
	{`Forwarded: proto=https;for`},
	{`Forwarded: for=198.51.100.9;proto=https, for=`},
	{`Forwarded: for="x`, `Forwarded: for=5.5.5.5;x="`},
	{`X-Forwarded-For: 1"`, `Forwarded: for="x`, `X-Real-IP: 9.9.9.9`},
}

// Front is one proxy in front of one upstream server. Start fills V4 and
// V6, the proxy's listen addresses (host:port on 127.0.0.1 and ::1). The
// proxy connects to Upstream from 127.0.0.1: the address to trust.
type Front struct {
	Kind     string // Nginx or HAProxy
	Header   string // "X-Forwarded-For" or "Forwarded": what the proxy appends
	Upstream string // host:port of the server
	V4, V6   string
}

// Start runs one nginx for the Nginx fronts and one HAProxy for the
// HAProxy fronts until the test ends, and returns once every listen
// address accepts connections. Configurations:
//
//   - nginx X-Forwarded-For: proxy_set_header X-Forwarded-For
//     $proxy_add_x_forwarded_for (the client's value, ", ", the address);
//   - nginx Forwarded: the client's value, ", ", then for=ADDR (IPv6:
//     for="[ADDR]"), concatenated as written, whatever the client sent;
//   - HAProxy 2.6 X-Forwarded-For: option forwardfor (a line of its own);
//   - HAProxy Forwarded (no option forwarded before 2.7): a Forwarded line
//     of its own, http-request add-header, IPv6 quoted and bracketed.
func Start(t testing.TB, fronts ...*Front) {
	t.Helper()
	dir := t.TempDir()
	var ngx, ha strings.Builder
	var ngxAddrs, haAddrs []string
	for i, f := range fronts {
		p := freePort(t)
		f.V4, f.V6 = fmt.Sprintf("127.0.0.1:%d", p), fmt.Sprintf("[::1]:%d", p)
		switch {
		case f.Kind == Nginx && f.Header == "X-Forwarded-For":
			fmt.Fprintf(&ngx, "\tserver { listen %s; listen %s; location / { proxy_pass http://%s; "+
				"proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; } }\n", f.V4, f.V6, f.Upstream)
			ngxAddrs = append(ngxAddrs, f.V4, f.V6)
		case f.Kind == Nginx && f.Header == "Forwarded":
			fmt.Fprintf(&ngx, "\tserver { listen %s; listen %s; location / { proxy_pass http://%s; "+
				"proxy_set_header Forwarded \"$http_forwarded, $forwarded_elem\"; } }\n", f.V4, f.V6, f.Upstream)
			ngxAddrs = append(ngxAddrs, f.V4, f.V6)
		case f.Kind == HAProxy && f.Header == "X-Forwarded-For":
			fmt.Fprintf(&ha, "frontend f%[1]d\n\tbind %[2]s\n\tbind %[3]s\n\toption forwardfor\n\tdefault_backend b%[1]d\n"+
				"backend b%[1]d\n\tserver s %[4]s\n", i, f.V4, f.V6, f.Upstream)
			haAddrs = append(haAddrs, f.V4, f.V6)
		case f.Kind == HAProxy && f.Header == "Forwarded":
			fmt.Fprintf(&ha, "frontend f%[1]d\n\tbind %[2]s\n\thttp-request add-header Forwarded for=%%[src]\n\tdefault_backend b%[1]d\n"+
				"frontend f%[1]d6\n\tbind %[3]s\n\thttp-request add-header Forwarded \"for=\\\"[%%[src]]\\\"\"\n\tdefault_backend b%[1]d\n"+
				"backend b%[1]d\n\tserver s %[4]s\n", i, f.V4, f.V6, f.Upstream)
			haAddrs = append(haAddrs, f.V4, f.V6)
		default:
			t.Fatalf("proxytest: no configuration for %s with %s", f.Kind, f.Header)
		}
	}
	if ngx.Len() > 0 {
		conf := fmt.Sprintf(`
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/nginx-error.log;
events { worker_connections 256; }
http {
	access_log off;
	client_body_temp_path %[1]s/body; proxy_temp_path %[1]s/proxy; fastcgi_temp_path %[1]s/fcgi;
	uwsgi_temp_path %[1]s/uwsgi; scgi_temp_path %[1]s/scgi;
	map $remote_addr $forwarded_elem {
		~^[0-9.]+$ "for=$remote_addr";
		default    "for=\"[$remote_addr]\"";
	}
%[2]s}
`, dir, ngx.String())
		file := filepath.Join(dir, "nginx.conf")
		write(t, file, conf)
		run(t, dir, NginxBin, []string{"-p", dir, "-e", filepath.Join(dir, "nginx-error.log"), "-c", file,
			"-g", "daemon off; user root;"}, ngxAddrs)
	}
	if ha.Len() > 0 {
		conf := "global\n\tmaxconn 256\ndefaults\n\tmode http\n\ttimeout connect 5s\n\ttimeout client 30s\n\ttimeout server 30s\n" + ha.String()
		file := filepath.Join(dir, "haproxy.cfg")
		write(t, file, conf)
		run(t, dir, HAProxyBin, []string{"-db", "-f", file}, haAddrs)
	}
}

func write(t testing.TB, file, content string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// freePort is a loopback TCP port nobody listens on.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// run runs bin with args until the test ends and waits until every address
// in addrs accepts connections.
func run(t testing.TB, dir, bin string, args, addrs []string) {
	t.Helper()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is not installed (%v): run scripts/install-proxies.sh (`make test` does)", bin, err)
	}
	out, err := os.Create(filepath.Join(dir, filepath.Base(bin)+".out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = out.Close()
	})
	for _, a := range addrs {
		deadline := time.Now().Add(10 * time.Second)
		for {
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err == nil {
				_ = c.Close()
				break
			}
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(out.Name())
				t.Fatalf("%s does not listen on %s: %v\n%s", bin, a, err, b)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Request sends one HTTP/1.1 request from src (a loopback address) to addr
// with the header lines as written (and Content-Length: 0), and returns the
// status and body.
func Request(t testing.TB, src net.IP, addr, method, path string, lines []string) (int, string) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: shop.test\r\nConnection: close\r\nContent-Length: 0\r\n", method, path)
	for _, l := range lines {
		b.WriteString(l + "\r\n")
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("proxytest: %s %s from %s via %s: %v", method, path, src, addr, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}
