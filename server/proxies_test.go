package server

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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/issuer"
)

// The proxy matrix (issue 31 §2): real nginx and HAProxy (Debian's,
// scripts/install-proxies.sh) in front of the server on loopback, each
// appending the address it saw the way it does in production (nginx
// $proxy_add_x_forwarded_for and a Forwarded element concatenated after
// the client's; HAProxy option forwardfor and a Forwarded line of its
// own), and clients sending hostile X-Forwarded-For and Forwarded headers
// through them. Every client has a loopback address of its own
// (127.0.C.N; ::1 for one IPv6 case), and every limit must key on it:
// never on the proxy (127.0.0.1, the trusted one), never on "unknown",
// never on what the client wrote.

const (
	nginxBin   = "/usr/sbin/nginx"
	haproxyBin = "/usr/sbin/haproxy"
)

// hostileHeaders are the header lines a client sends through the proxy,
// one case each (raw: several lines, any bytes a proxy passes).
var hostileHeaders = [][]string{
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

// proxyFront is one proxy configuration in front of its own server.
type proxyFront struct {
	name   string
	header string // the server's ProxyHeader
	v4, v6 string // the proxy's listen addresses (host:port)
}

// freePort is a loopback TCP port nobody listens on (for a proxy's config).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startProxy runs bin with args until the test ends and waits until every
// address in addrs accepts connections.
func startProxy(t *testing.T, dir, bin string, args []string, addrs ...string) {
	t.Helper()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is not installed (%v): run scripts/install-proxies.sh (`make test` does)", bin, err)
	}
	out, err := os.Create(filepath.Join(dir, filepath.Base(bin)+".out"))
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
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

// proxiedRequest sends one HTTP/1.1 request from src to addr with the extra
// header lines as written, and returns the status and body.
func proxiedRequest(t *testing.T, src net.IP, addr, method, path string, lines []string) (int, string) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: shop.test\r\nConnection: close\r\nContent-Length: 0\r\n", method, path)
	for _, l := range lines {
		b.WriteString(l + "\r\n")
	}
	b.WriteString("\r\n")
	_, err = io.WriteString(c, b.String())
	require.NoError(t, err)
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// adminKeys are the keys of the admin failure counter (addrKey's) with
// their counts.
func adminKeys(s *Server) map[string]int {
	s.adminFails.mu.Lock()
	defer s.adminFails.mu.Unlock()
	out := map[string]int{}
	for k, e := range s.adminFails.m {
		out[k] = e.n
	}
	return out
}

// TestProxyMatrix: hostile client headers through real nginx and HAProxy;
// the enter limit and the admin failure counter key on the client's own
// address every time.
func TestProxyMatrix(t *testing.T) {
	dir := t.TempDir()
	const perAddr = 2 // enters per address and window
	backends := map[string]*env{}
	port := func(name, header string) string {
		e := newEnv(t, withOptions(func(o *Options) {
			o.ProxyHeader, o.TrustedProxies = header, []string{"127.0.0.1"}
			o.EnterPerAddress, o.EnterWindow = perAddr, time.Hour
		}))
		backends[name] = e
		return strings.TrimPrefix(e.listen(), "http://")
	}
	front := func(name, header string) proxyFront {
		p := freePort(t)
		return proxyFront{name: name, header: header, v4: fmt.Sprintf("127.0.0.1:%d", p), v6: fmt.Sprintf("[::1]:%d", p)}
	}
	fronts := []proxyFront{
		front("nginx-xff", "X-Forwarded-For"), front("nginx-forwarded", "Forwarded"),
		front("haproxy-xff", "X-Forwarded-For"), front("haproxy-forwarded", "Forwarded"),
	}
	up := map[string]string{}
	for _, f := range fronts {
		up[f.name] = port(f.name, f.header)
	}

	// nginx: the appending configurations its documentation gives; the
	// Forwarded one appends to whatever the client sent, as written.
	nginxConf := fmt.Sprintf(`
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
	server {
		listen %[2]s; listen %[3]s;
		location / { proxy_pass http://%[4]s; proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; }
	}
	server {
		listen %[5]s; listen %[6]s;
		location / { proxy_pass http://%[7]s; proxy_set_header Forwarded "$http_forwarded, $forwarded_elem"; }
	}
}
`, dir, fronts[0].v4, fronts[0].v6, up["nginx-xff"], fronts[1].v4, fronts[1].v6, up["nginx-forwarded"])
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(nginxConf), 0o600))
	startProxy(t, dir, nginxBin, []string{"-p", dir, "-e", filepath.Join(dir, "nginx-error.log"),
		"-c", filepath.Join(dir, "nginx.conf"), "-g", "daemon off; user root;"},
		fronts[0].v4, fronts[0].v6, fronts[1].v4, fronts[1].v6)

	// HAProxy 2.6 (Debian 12): option forwardfor adds an X-Forwarded-For
	// line of its own; Forwarded (no option forwarded before 2.7) a line
	// added the same way, IPv6 quoted and bracketed as RFC 7239 says.
	haConf := fmt.Sprintf(`
global
	maxconn 256
defaults
	mode http
	timeout connect 5s
	timeout client 30s
	timeout server 30s
frontend xff
	bind %[1]s
	bind %[2]s
	option forwardfor
	default_backend xff
backend xff
	server s %[3]s
frontend fwd4
	bind %[4]s
	http-request add-header Forwarded for=%%[src]
	default_backend fwd
frontend fwd6
	bind %[5]s
	http-request add-header Forwarded "for=\"[%%[src]]\""
	default_backend fwd
backend fwd
	server s %[6]s
`, fronts[2].v4, fronts[2].v6, up["haproxy-xff"], fronts[3].v4, fronts[3].v6, up["haproxy-forwarded"])
	require.NoError(t, os.WriteFile(filepath.Join(dir, "haproxy.cfg"), []byte(haConf), 0o600))
	startProxy(t, dir, haproxyBin, []string{"-db", "-f", filepath.Join(dir, "haproxy.cfg")},
		fronts[2].v4, fronts[2].v6, fronts[3].v4, fronts[3].v6)

	for fi, f := range fronts {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			e := backends[f.name]
			room := e.room(issuer.RoomConfig{Capacity: 1000})
			// One client: perAddr enters and one admin failure with its
			// hostile lines, then one enter over the budget.
			client := func(src net.IP, target, wantKey string, lines []string, i int) {
				t.Helper()
				user := []string{fmt.Sprintf("X-User-ID: u%d-%d", fi, i)}
				for n := range perAddr {
					st, body := proxiedRequest(t, src, target, "POST", "/v1/rooms/"+room+"/enter", append(user, lines...))
					require.Equal(t, 200, st, "enter %d from %s with %q: %s", n, src, lines, body)
				}
				st, body := proxiedRequest(t, src, target, "GET", "/admin/rooms", append([]string{"Authorization: Bearer wrong"}, lines...))
				require.Equal(t, 401, st, "admin from %s with %q: %s", src, lines, body)
				keys := adminKeys(e.srv)
				assert.Equal(t, 1, keys[wantKey], "admin failure keyed on %s (client %s, lines %q): %v", wantKey, src, lines, keys)
				assert.NotContains(t, keys, "127.0.0.1", "keyed on the proxy")
				assert.NotContains(t, keys, UnknownAddr)
				// Over the budget: the enter limit keyed on the same address.
				st, body = proxiedRequest(t, src, target, "POST", "/v1/rooms/"+room+"/enter", append(user, lines...))
				assert.Equal(t, 429, st, "enter %d from %s with %q: %s", perAddr+1, src, lines, body)
			}
			for i, lines := range hostileHeaders {
				src := net.IPv4(127, byte(10+fi), byte(i/250), byte(1+i%250))
				client(src, f.v4, src.String(), lines, i)
			}
			// IPv6: ::1, keyed on its /64.
			client(net.IPv6loopback, f.v6, "::/64", []string{`X-Forwarded-For: 1"`, `Forwarded: for="x`}, len(hostileHeaders))
			assert.Len(t, adminKeys(e.srv), len(hostileHeaders)+1, "one key per client")
		})
	}
}
