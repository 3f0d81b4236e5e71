package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/proxytest"
	"github.com/flashgate/flashgate/internal/testing/redistest"
)

// TestStreamsBehindProxies (issue 34 §1): the waiting page's event stream,
// which `flashgate serve` writes straight to the connection after its
// first event, through real nginx (default proxy settings: HTTP/1.0 to the
// upstream, buffering unless the response says X-Accel-Buffering: no) and
// HAProxy, and directly over HTTP/1.0 and HTTP/1.1: the first event at
// once, an operator's pause as the next event within a few seconds, and a
// well-formed body throughout (Go's HTTP client reads the framing each
// proxy chose).
func TestStreamsBehindProxies(t *testing.T) {
	t.Setenv("REDIS_URL", "redis://"+redistest.Start(t).Addr+"/0")
	const admin = "0123456789abcdef0123456789abcdef-admin"
	t.Setenv("FLASHGATE_ADMIN_TOKEN", admin)
	t.Setenv("FLASHGATE_ACCESS_LOG", "false")
	addr, _, _ := startServe(t)
	fronts := []*proxytest.Front{
		{Kind: proxytest.Nginx, Header: "X-Forwarded-For", Upstream: addr},
		{Kind: proxytest.HAProxy, Header: "X-Forwarded-For", Upstream: addr},
	}
	proxytest.Start(t, fronts...)
	adminDo := func(method, path, body string) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		require.Less(t, res.StatusCode, 300, "%s %s: %s", method, path, b)
	}
	adminDo("PUT", "/admin/rooms/sale", `{"capacity":1,"rate_per_minute":60,"state":"paused"}`)

	type via struct {
		name, addr, proto string
	}
	vias := []via{{"direct HTTP/1.1", addr, "HTTP/1.1"}, {"direct HTTP/1.0", addr, "HTTP/1.0"},
		{"nginx", fronts[0].V4, "HTTP/1.1"}, {"haproxy", fronts[1].V4, "HTTP/1.1"}}
	type open struct {
		via
		events chan map[string]any
		conn   net.Conn
	}
	var opens []open
	for i, v := range vias {
		user := fmt.Sprintf("u%d", i)
		req, err := http.NewRequest("POST", "http://"+addr+"/v1/rooms/sale/enter", nil)
		require.NoError(t, err)
		req.Header.Set("X-User-ID", user)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var en map[string]any
		require.NoError(t, json.NewDecoder(res.Body).Decode(&en))
		res.Body.Close()
		require.Equal(t, "WAITING", en["state"], "%v", en)

		c, err := net.Dial("tcp", v.addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		_, err = fmt.Fprintf(c, "GET /v1/rooms/sale/events?waiting_token=%s %s\r\nHost: shop.test\r\nX-User-ID: %s\r\nAccept-Encoding: gzip, br\r\n\r\n",
			en["waiting_token"], v.proto, user)
		require.NoError(t, err)
		br := bufio.NewReader(c)
		sres, err := http.ReadResponse(br, nil)
		require.NoError(t, err, v.name)
		require.Equal(t, 200, sres.StatusCode, v.name)
		assert.Equal(t, "text/event-stream", sres.Header.Get("Content-Type"), v.name)
		assert.Empty(t, sres.Header.Get("Content-Encoding"), "%s: events are written as they are", v.name)
		assert.Equal(t, "no-store", sres.Header.Get("Cache-Control"), v.name)
		if v.proto == "HTTP/1.0" {
			assert.Empty(t, sres.TransferEncoding, "%s: no chunked coding for an HTTP/1.0 client (RFC 9112 §6.1)", v.name)
		}
		o := open{via: v, events: make(chan map[string]any, 16), conn: c}
		go func() {
			defer close(o.events)
			sc := bufio.NewScanner(sres.Body)
			for sc.Scan() {
				if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					var m map[string]any
					if json.Unmarshal([]byte(d), &m) == nil {
						o.events <- m
					}
				}
			}
		}()
		opens = append(opens, o)
	}
	next := func(o open) map[string]any {
		t.Helper()
		select {
		case m, ok := <-o.events:
			require.True(t, ok, "%s: the stream ended", o.name)
			return m
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no event in 10 s", o.name)
			return nil
		}
	}
	for _, o := range opens {
		m := next(o)
		assert.Equal(t, "WAITING", m["state"], o.name)
		assert.Equal(t, "paused", m["room_state"], o.name)
	}
	adminDo("POST", "/admin/rooms/sale/open", "")
	for _, o := range opens {
		m := next(o)
		assert.Equal(t, "open", m["room_state"], "%s: the state change is the next event", o.name)
	}
}
