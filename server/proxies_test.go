package server

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/proxytest"
	"github.com/flashgate/flashgate/issuer"
)

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

// TestProxyMatrix (issue 31 §2): real nginx and HAProxy (proxytest) in
// front of four servers on loopback — each proxy appending X-Forwarded-For
// or Forwarded as it does in production — and clients sending hostile
// headers through them (proxytest.HostileHeaders), each client from a
// loopback address of its own (127.0.C.N; ::1 for one IPv6 client per
// proxy). The enter limit and the admin failure counter key on that
// address every time: never on the proxy (127.0.0.1, the trusted one),
// never on "unknown", never on what the client wrote.
func TestProxyMatrix(t *testing.T) {
	const perAddr = 2 // enters per address and window
	fronts := []*proxytest.Front{
		{Kind: proxytest.Nginx, Header: "X-Forwarded-For"}, {Kind: proxytest.Nginx, Header: "Forwarded"},
		{Kind: proxytest.HAProxy, Header: "X-Forwarded-For"}, {Kind: proxytest.HAProxy, Header: "Forwarded"},
	}
	envs := make([]*env, len(fronts))
	for i, f := range fronts {
		envs[i] = newEnv(t, withOptions(func(o *Options) {
			o.ProxyHeader, o.TrustedProxies = f.Header, []string{"127.0.0.1"}
			o.EnterPerAddress, o.EnterWindow = perAddr, time.Hour
		}))
		f.Upstream = strings.TrimPrefix(envs[i].listen(), "http://")
	}
	proxytest.Start(t, fronts...)

	for fi, f := range fronts {
		t.Run(f.Kind+"-"+f.Header, func(t *testing.T) {
			t.Parallel()
			e := envs[fi]
			room := e.room(issuer.RoomConfig{Capacity: 1000})
			// One client: perAddr enters and one admin failure with its
			// lines, then one enter over the budget.
			client := func(src net.IP, target, wantKey string, lines []string, i int) {
				t.Helper()
				user := []string{fmt.Sprintf("X-User-ID: u%d-%d", fi, i)}
				for n := range perAddr {
					st, body := proxytest.Request(t, src, target, "POST", "/v1/rooms/"+room+"/enter", append(user, lines...))
					require.Equal(t, 200, st, "enter %d from %s with %q: %s", n, src, lines, body)
				}
				st, body := proxytest.Request(t, src, target, "GET", "/admin/rooms", append([]string{"Authorization: Bearer wrong"}, lines...))
				require.Equal(t, 401, st, "admin from %s with %q: %s", src, lines, body)
				keys := adminKeys(e.srv)
				assert.Equal(t, 1, keys[wantKey], "admin failure keyed on %s (client %s, lines %q): %v", wantKey, src, lines, keys)
				assert.NotContains(t, keys, "127.0.0.1", "keyed on the proxy")
				assert.NotContains(t, keys, UnknownAddr)
				// Over the budget: the enter limit keyed on the same address.
				st, body = proxytest.Request(t, src, target, "POST", "/v1/rooms/"+room+"/enter", append(user, lines...))
				assert.Equal(t, 429, st, "enter %d from %s with %q: %s", perAddr+1, src, lines, body)
			}
			for i, lines := range proxytest.HostileHeaders {
				src := net.IPv4(127, byte(10+fi), byte(i/250), byte(1+i%250))
				client(src, f.V4, src.String(), lines, i)
			}
			// IPv6: ::1, keyed on its /64.
			client(net.IPv6loopback, f.V6, "::/64", []string{`X-Forwarded-For: 1"`, `Forwarded: for="x`}, len(proxytest.HostileHeaders))
			assert.Len(t, adminKeys(e.srv), len(proxytest.HostileHeaders)+1, "one key per client")
		})
	}
}
