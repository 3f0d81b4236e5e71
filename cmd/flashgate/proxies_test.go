package main

import (
	"fmt"
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/proxytest"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/server"
)

// TestServeBehindProxies (issue 31 §2): `flashgate serve` with
// FLASHGATE_PROXY_HEADER=X-Forwarded-For behind real nginx
// ($proxy_add_x_forwarded_for) and HAProxy (option forwardfor), clients
// sending proxytest.HostileHeaders through them, each client from a
// loopback address of its own. Two limits must key on that address every
// time: the enter limit (FLASHGATE_ENTER_PER_ADDRESS=2: two enters, then
// 429) and the admin lockout (10 failures, then 429 for that address only:
// the next client's failure is still a 401). Keyed on the proxy, the
// second client would find both spent.
func TestServeBehindProxies(t *testing.T) {
	t.Setenv("REDIS_URL", "redis://"+redistest.Start(t).Addr+"/0")
	t.Setenv("FLASHGATE_PROXY_HEADER", "X-Forwarded-For")
	t.Setenv("FLASHGATE_TRUSTED_PROXIES", "127.0.0.1")
	t.Setenv("FLASHGATE_ENTER_PER_ADDRESS", "2")
	t.Setenv("FLASHGATE_DEFAULT_ROOM", "open")
	t.Setenv("FLASHGATE_AUTO_ROOMS_PER_ADDRESS", "1000")
	t.Setenv("FLASHGATE_ADMIN_TOKEN", "0123456789abcdef0123456789abcdef-admin")
	t.Setenv("FLASHGATE_ACCESS_LOG", "false")
	addr, _, _ := startServe(t)
	fronts := []*proxytest.Front{
		{Kind: proxytest.Nginx, Header: "X-Forwarded-For", Upstream: addr},
		{Kind: proxytest.HAProxy, Header: "X-Forwarded-For", Upstream: addr},
	}
	proxytest.Start(t, fronts...)

	for fi, f := range fronts {
		for i, lines := range proxytest.HostileHeaders {
			src := net.IPv4(127, byte(20+fi), 0, byte(1+i))
			user := fmt.Sprintf("X-User-ID: u%d-%d", fi, i)
			for n := range 2 {
				st, body := proxytest.Request(t, src, f.V4, "POST", "/v1/rooms/sale/enter", append([]string{user}, lines...))
				require.Equal(t, 200, st, "%s: enter %d from %s with %q: %s", f.Kind, n, src, lines, body)
			}
			st, body := proxytest.Request(t, src, f.V4, "POST", "/v1/rooms/sale/enter", append([]string{user}, lines...))
			assert.Equal(t, 429, st, "%s: enter 3 from %s with %q: %s", f.Kind, src, lines, body)
		}
		// The admin lockout: one client spends its failures, the next
		// (another address, the same hostile header) is not locked out.
		for c := range 2 {
			src := net.IPv4(127, byte(30+fi), 0, byte(1+c))
			lines := []string{`X-Forwarded-For: 1"`, "Authorization: Bearer wrong-" + strconv.Itoa(c)}
			for n := range server.AdminFailuresPerAddress {
				st, body := proxytest.Request(t, src, f.V4, "GET", "/admin/rooms", lines)
				require.Equal(t, 401, st, "%s: admin failure %d from %s: %s", f.Kind, n, src, body)
			}
			st, _ := proxytest.Request(t, src, f.V4, "GET", "/admin/rooms", lines)
			assert.Equal(t, 429, st, "%s: locked out after %d failures", f.Kind, server.AdminFailuresPerAddress)
		}
	}
	// IPv6: ::1 through either proxy's [::1] listener is one client with
	// one budget: two enters through nginx, the third through HAProxy is
	// refused.
	v6 := []string{"X-User-ID: v6", `X-Forwarded-For: 1"`}
	for n := range 2 {
		st, body := proxytest.Request(t, net.IPv6loopback, fronts[0].V6, "POST", "/v1/rooms/sale/enter", v6)
		require.Equal(t, 200, st, "enter %d from ::1: %s", n, body)
	}
	st, body := proxytest.Request(t, net.IPv6loopback, fronts[1].V6, "POST", "/v1/rooms/sale/enter", v6)
	assert.Equal(t, 429, st, "enter 3 from ::1, through HAProxy: %s", body)
}
