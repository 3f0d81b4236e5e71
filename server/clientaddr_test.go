package server

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/issuer"
)

// TestClientAddrWalk: the client address is the right-most entry that is
// not a trusted proxy; what names no address where the walk reaches falls
// back to the peer.
func TestClientAddrWalk(t *testing.T) {
	peer := netip.MustParseAddr("10.0.0.2") // a trusted proxy
	xff, err := newAddrPolicy("X-Forwarded-For", []string{"10.0.0.0/8", "2001:db8:ffff::/48", "::ffff:192.168.0.1"}, 0, 0)
	require.NoError(t, err)
	fwd, err := newAddrPolicy("forwarded", []string{"10.0.0.0/8", "2001:db8:ffff::/48"}, 0, 0)
	require.NoError(t, err)
	for _, tc := range []struct {
		p      *addrPolicy
		lines  []string
		client string
	}{
		// X-Forwarded-For: the proxy appends the address it saw.
		{xff, []string{"198.51.100.7"}, "198.51.100.7"},
		{xff, []string{"1.1.1.1, 198.51.100.7"}, "198.51.100.7"}, // the leftmost is the client's word
		{xff, []string{"1.1.1.1, 198.51.100.7, 10.1.2.3"}, "198.51.100.7"},
		{xff, []string{"1.1.1.1", "198.51.100.7, 10.1.2.3"}, "198.51.100.7"}, // several lines, in order
		{xff, []string{"198.51.100.7,10.1.2.3,,10.9.9.9"}, "198.51.100.7"},   // empty list elements
		{xff, []string{"198.51.100.7:4711"}, "198.51.100.7"},
		{xff, []string{"[2001:db8::1]:4711"}, "2001:db8::1"},
		{xff, []string{"[2001:db8::1]"}, "2001:db8::1"},
		{xff, []string{"2001:db8::1, 2001:db8:ffff::9"}, "2001:db8::1"},
		{xff, []string{"::ffff:198.51.100.7"}, "198.51.100.7"}, // IPv4-mapped: IPv4
		{xff, []string{"fe80::1%eth0"}, "fe80::1"},
		{xff, []string{"198.51.100.7, 192.168.0.1"}, "198.51.100.7"}, // a mapped trusted proxy matches its IPv4 form
		// The proxy's own request (no header): the peer.
		{xff, nil, "10.0.0.2"},
		{xff, []string{""}, "10.0.0.2"},
		{xff, []string{" ", ""}, "10.0.0.2"},
		// Names no address where the walk reaches it, or only trusted
		// proxies: no address ("unknown"), never the proxy's.
		{xff, []string{"198.51.100.7, garbage"}, "unknown"},
		{xff, []string{"198.51.100.7, unknown, 10.1.2.3"}, "unknown"},
		{xff, []string{"garbage, 198.51.100.7"}, "198.51.100.7"}, // left of the client: never read
		{xff, []string{"1.2.3.4.5"}, "unknown"},
		{xff, []string{"10.4.4.4, 10.1.2.3"}, "unknown"},
		{xff, []string{"0.0.0.0"}, "unknown"},
		// What a client writes to the left of an appending proxy's entry
		// never hides it (issue 31: a quote swallowed the appended entry,
		// and the client became the proxy).
		{xff, []string{`1", 198.51.100.7`}, "198.51.100.7"},   // nginx: one line
		{xff, []string{`1"`, "198.51.100.7"}, "198.51.100.7"}, // HAProxy: a line of its own
		{xff, []string{`"1.1.1.1, 2.2.2.2", 198.51.100.7`}, "198.51.100.7"},
		{xff, []string{`\", 198.51.100.7, 10.1.2.3`}, "198.51.100.7"},
		{xff, []string{`for="[::1]", 198.51.100.7`}, "198.51.100.7"},
		{xff, []string{"10.1.2.3, 198.51.100.7"}, "198.51.100.7"}, // the client naming a proxy
		// Forwarded (RFC 7239 §4, §6, §7).
		{fwd, []string{"for=192.0.2.60;proto=http;by=203.0.113.43"}, "192.0.2.60"},
		{fwd, []string{`for="[2001:db8::1]:4711"`}, "2001:db8::1"},
		{fwd, []string{`For="[2001:db8::1]"`}, "2001:db8::1"},
		{fwd, []string{"for=192.0.2.43, for=198.51.100.17"}, "198.51.100.17"},
		{fwd, []string{"for=192.0.2.43, for=198.51.100.17;by=x, for=10.1.1.1"}, "198.51.100.17"},
		{fwd, []string{`for="_hidden, for=1.1.1.1", for=198.51.100.17`}, "198.51.100.17"}, // a comma in quotes
		{fwd, []string{"for=198.51.100.17, for=unknown"}, "unknown"},
		{fwd, []string{"for=198.51.100.17, for=_gazonk"}, "unknown"},
		{fwd, []string{"for=198.51.100.17, proto=https"}, "unknown"}, // an element without for=
		{fwd, []string{`for="\"[2001:db8::1]"`}, "unknown"},
		{fwd, nil, "10.0.0.2"},
		// A client's unterminated quoted string never swallows the
		// element a proxy appended after it, nor its own line.
		{fwd, []string{`for="x, for=198.51.100.17`}, "198.51.100.17"},
		{fwd, []string{`for=1.1.1.1;by="`, "for=198.51.100.17"}, "198.51.100.17"},
		{fwd, []string{`for="1.1.1.1\", for=198.51.100.17`}, "198.51.100.17"},
		{fwd, []string{`for=_hidden;x=", for="[2001:db8::7]:80"`}, "2001:db8::7"},
	} {
		vals := make([][]byte, len(tc.lines))
		for i, l := range tc.lines {
			vals[i] = []byte(l)
		}
		assert.Equal(t, tc.client, remoteString(tc.p.client(peer, vals)), "%s: %q", tc.p.header, tc.lines)
	}
	// From a peer that is not a trusted proxy the header is never read.
	other := netip.MustParseAddr("203.0.113.9")
	assert.Equal(t, other, xff.client(other, [][]byte{[]byte("198.51.100.7")}))
	// Without a proxy header: the peer.
	none, err := newAddrPolicy("", nil, 0, 0)
	require.NoError(t, err)
	assert.Equal(t, peer, none.client(peer, [][]byte{[]byte("198.51.100.7")}))
}

func TestClientAddrKey(t *testing.T) {
	p, err := newAddrPolicy("", nil, 0, 0)
	require.NoError(t, err)
	for addr, key := range map[string]string{
		"198.51.100.7":             "198.51.100.7",
		"2001:db8:1:2:3:4:5:6":     "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::1":     "2001:db8:1:2::/64",
		"2001:db8:1:3::1":          "2001:db8:1:3::/64",
		"::ffff:198.51.100.7":      "198.51.100.7", // parsed nodes and peers are unmapped
		"2001:db8:aaaa:bbbb::1234": "2001:db8:aaaa:bbbb::/64",
	} {
		assert.Equal(t, key, p.key(netip.MustParseAddr(addr).Unmap()), addr)
	}
	assert.Equal(t, UnknownAddr, p.key(netip.Addr{}), "no address: one shared key")
	p, err = newAddrPolicy("", nil, 24, 48)
	require.NoError(t, err)
	assert.Equal(t, "198.51.100.0/24", p.key(netip.MustParseAddr("198.51.100.7")))
	assert.Equal(t, "2001:db8:1::/48", p.key(netip.MustParseAddr("2001:db8:1:2::1")))
	p, err = newAddrPolicy("", nil, 32, 128)
	require.NoError(t, err)
	assert.Equal(t, "2001:db8:1:2::1", p.key(netip.MustParseAddr("2001:db8:1:2::1")))

	for _, bad := range [][2]int{{33, 0}, {0, 129}, {-1, 0}, {0, -64}} {
		_, err := newAddrPolicy("", nil, bad[0], bad[1])
		assert.Error(t, err, "%v", bad)
	}
}

// TestEnterRateLimitIPv6Prefix: the addresses of one IPv6 /64 share one
// budget (one subscriber has them all); another /64 has its own.
func TestEnterRateLimitIPv6Prefix(t *testing.T) {
	const window = 10 * time.Second
	e := newEnv(t, privateRedis(), withOptions(behindProxy, func(o *Options) { o.EnterPerAddress, o.EnterWindow = 3, window }))
	room := e.room(issuer.RoomConfig{Capacity: 1})
	for i, addr := range []string{"2001:db8:7:7::1", "2001:db8:7:7::2", "2001:db8:7:7:ffff:ffff:ffff:ffff"} {
		require.Equal(t, 200, e.enterAs(room, "u"+string(rune('a'+i)), addr).status, addr)
	}
	for i, addr := range []string{"2001:db8:7:7::3", "2001:db8:7:7:1:2:3:4", "2001:db8:7:7::5", "2001:db8:7:7::6"} {
		limited(t, e.enterAs(room, "v"+string(rune('a'+i)), addr), window)
	}
	require.Equal(t, 200, e.enterAs(room, "w", "2001:db8:7:8::1").status, "the next /64")

	// IPv4-mapped IPv6 is its IPv4 address.
	for _, addr := range []string{"198.51.100.4", "::ffff:198.51.100.4", "198.51.100.4"} {
		require.Equal(t, 200, e.enterAs(room, "m"+strings.ReplaceAll(addr, ":", ""), addr).status, addr)
	}
	limited(t, e.enterAs(room, "m4", "::ffff:198.51.100.4"), window)

	// A /128 prefix keys every address on its own.
	e = newEnv(t, privateRedis(), withOptions(behindProxy, func(o *Options) {
		o.EnterPerAddress, o.EnterWindow, o.AddressPrefixV6 = 1, window, 128
	}))
	room = e.room(issuer.RoomConfig{Capacity: 1})
	require.Equal(t, 200, e.enterAs(room, "a", "2001:db8:7:7::1").status)
	require.Equal(t, 200, e.enterAs(room, "b", "2001:db8:7:7::2").status)
	limited(t, e.enterAs(room, "c", "2001:db8:7:7::2"), window)
}

// TestEnterRateLimitForwarded: RFC 7239's Forwarded as the proxy header.
func TestEnterRateLimitForwarded(t *testing.T) {
	const window = 10 * time.Second
	e := newEnv(t, privateRedis(), withOptions(func(o *Options) {
		o.ProxyHeader, o.TrustedProxies = "Forwarded", []string{"0.0.0.0", "10.0.0.0/8"}
		o.EnterPerAddress, o.EnterWindow = 2, window
	}))
	room := e.room(issuer.RoomConfig{Capacity: 1})
	fwd := func(user, value string) resp {
		return e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", user: user,
			hdr: map[string]string{"Forwarded": value}})
	}
	require.Equal(t, 200, fwd("a", `for="[2001:db8:5:5::1]:4711";proto=https`).status)
	// What the client wrote to the left does not give it a new budget.
	require.Equal(t, 200, fwd("b", `for=192.0.2.1, for="[2001:db8:5:5::2]", for=10.1.1.1`).status)
	limited(t, fwd("c", `for=192.0.2.2, for="[2001:db8:5:5::3]:1"`), window)
	require.Equal(t, 200, fwd("d", `for=192.0.2.2`).status)
	// An obfuscated identifier: the peer's budget (0.0.0.0), its own.
	require.Equal(t, 200, fwd("e", `for=192.0.2.2, for=_hidden`).status)
	require.Equal(t, 200, fwd("f", `for=unknown`).status)
	limited(t, fwd("g", `for=garbage`), window)
}

// TestClientAddrInLogs: the audit log's remote is the client address.
func TestClientAddrInLogs(t *testing.T) {
	var l jsonLog
	e := newEnv(t, withOptions(func(o *Options) {
		o.ProxyHeader, o.TrustedProxies = "X-Forwarded-For", []string{"0.0.0.0"}
		o.Logger, o.AccessLog = slog.New(slog.NewJSONHandler(&l, nil)), true
	}))
	r := e.do(req{method: "PUT", path: "/admin/rooms/r1", bearer: "wrong", body: "{}",
		hdr: map[string]string{"X-Forwarded-For": "6.6.6.6, 198.51.100.77"}})
	require.Equal(t, 401, r.status)
	recs := l.records(t, "admin audit")
	require.Len(t, recs, 1)
	assert.Equal(t, "198.51.100.77", recs[0]["remote"])
}

// BenchmarkClientAddr: the walk and key of a three-entry X-Forwarded-For
// from a trusted proxy, what every enter pays for its per-address limit.
func BenchmarkClientAddr(b *testing.B) {
	p, err := newAddrPolicy("X-Forwarded-For", []string{"10.0.0.0/8", "2001:db8:ffff::/48"}, 0, 0)
	require.NoError(b, err)
	peer := netip.MustParseAddr("10.0.0.2")
	vals := [][]byte{[]byte("203.0.113.9, 2001:db8:1:2::77, 10.1.2.3")}
	b.ReportAllocs()
	for b.Loop() {
		if p.key(p.client(peer, vals)) != "2001:db8:1:2::/64" {
			b.Fatal("wrong key")
		}
	}
}
