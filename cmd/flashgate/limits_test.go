package main

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/server"
)

func TestServeEnterLimitDefaults(t *testing.T) {
	c, err := loadServeEnv(map[string]string{})
	require.NoError(t, err)
	s := c.Serve
	assert.Equal(t, server.DefaultEnterPerUser, s.EnterPerUser)
	assert.Equal(t, server.DefaultEnterPerAddress, s.EnterPerAddress)
	assert.Equal(t, server.DefaultEnterWindow, s.EnterWindow)
	assert.Empty(t, s.ProxyHeader)
	assert.Empty(t, s.TrustedProxies)
	// Without a proxy header every request has the gateway's address: the
	// per-address limit stays off.
	assert.Equal(t, 0, s.enterPerAddress())
	assert.Equal(t, 0, s.serverOptions().AutoRoomsPerAddress)

	// In visitor mode the peer is the client: the limits apply to it.
	c, err = loadServeEnv(map[string]string{"FLASHGATE_IDENTITY": "visitor", "FLASHGATE_DEFAULT_ROOM": "open"})
	require.NoError(t, err)
	o := c.Serve.serverOptions()
	assert.Equal(t, server.DefaultEnterPerAddress, o.EnterPerAddress)
	assert.Equal(t, server.DefaultAutoRoomsPerAddress, o.AutoRoomsPerAddress)
	assert.Equal(t, server.DefaultAutoRoomWindow, o.AutoRoomWindow)
	assert.Empty(t, o.ProxyHeader)
	// Without DEFAULT_ROOM no room is ever created by an enter.
	c, err = loadServeEnv(map[string]string{"FLASHGATE_IDENTITY": "visitor"})
	require.NoError(t, err)
	assert.Zero(t, c.Serve.serverOptions().AutoRoomsPerAddress)

	// The per-user limits and the address prefixes.
	o = s.serverOptions()
	assert.Equal(t, server.DefaultStatusPerUser, o.StatusPerUser)
	assert.Equal(t, server.DefaultExchangePerUser, o.ExchangePerUser)
	assert.Equal(t, server.DefaultLeavePerUser, o.LeavePerUser)
	assert.Equal(t, server.DefaultCompletePerUser, o.CompletePerUser)
	assert.Equal(t, server.DefaultAddressPrefixV4, o.AddressPrefixV4)
	assert.Equal(t, server.DefaultAddressPrefixV6, o.AddressPrefixV6)

	// The documented defaults are the server's suggested ones.
	f, _ := reflect.TypeOf(serveConfig{}).FieldByName("EnterPerUser")
	assert.Equal(t, strconv.Itoa(server.DefaultEnterPerUser), f.Tag.Get("envDefault"))
	f, _ = reflect.TypeOf(serveConfig{}).FieldByName("EnterPerAddress")
	assert.Equal(t, strconv.Itoa(server.DefaultEnterPerAddress), f.Tag.Get("envDefault"))
}

func TestServeEnterLimitConfig(t *testing.T) {
	c, err := loadServeEnv(map[string]string{
		"FLASHGATE_ENTER_PER_USER":    "5",
		"FLASHGATE_ENTER_PER_ADDRESS": "50",
		"FLASHGATE_ENTER_WINDOW":      "1m",
		"FLASHGATE_PROXY_HEADER":      " CF-Connecting-IP ",
		"FLASHGATE_TRUSTED_PROXIES":   "10.0.0.0/8, 192.0.2.1,2001:db8::/32",
	})
	require.NoError(t, err)
	s := c.Serve
	assert.Equal(t, 5, s.EnterPerUser)
	assert.Equal(t, 50, s.enterPerAddress())
	assert.Equal(t, time.Minute, s.EnterWindow)
	assert.Equal(t, "CF-Connecting-IP", s.ProxyHeader)
	assert.Equal(t, []string{"10.0.0.0/8", "192.0.2.1", "2001:db8::/32"}, s.TrustedProxies)

	c, err = loadServeEnv(map[string]string{"FLASHGATE_ENTER_PER_USER": "0", "FLASHGATE_ENTER_PER_ADDRESS": "0"})
	require.NoError(t, err)
	assert.Zero(t, c.Serve.EnterPerUser)
	assert.Zero(t, c.Serve.enterPerAddress())

	for name, env := range map[string]map[string]string{
		"negative per user":         {"FLASHGATE_ENTER_PER_USER": "-1"},
		"negative per address":      {"FLASHGATE_ENTER_PER_ADDRESS": "-5"},
		"not a number":              {"FLASHGATE_ENTER_PER_USER": "many"},
		"zero window":               {"FLASHGATE_ENTER_WINDOW": "0s"},
		"fractional window":         {"FLASHGATE_ENTER_WINDOW": "1500ms"},
		"proxy header alone":        {"FLASHGATE_PROXY_HEADER": "X-Real-IP"},
		"trusted proxies alone":     {"FLASHGATE_TRUSTED_PROXIES": "10.0.0.1"},
		"bad trusted proxy":         {"FLASHGATE_PROXY_HEADER": "X-Real-IP", "FLASHGATE_TRUSTED_PROXIES": "gateway.internal"},
		"bad trusted range":         {"FLASHGATE_PROXY_HEADER": "X-Real-IP", "FLASHGATE_TRUSTED_PROXIES": "10.0.0.0/40"},
		"empty trusted proxy entry": {"FLASHGATE_PROXY_HEADER": "X-Real-IP", "FLASHGATE_TRUSTED_PROXIES": "10.0.0.1,,"},
		"negative status limit":     {"FLASHGATE_STATUS_PER_USER": "-1"},
		"negative exchange limit":   {"FLASHGATE_EXCHANGE_PER_USER": "-1"},
		"negative leave limit":      {"FLASHGATE_LEAVE_PER_USER": "-1"},
		"negative complete limit":   {"FLASHGATE_COMPLETE_PER_USER": "-1"},
		"negative auto-room limit":  {"FLASHGATE_AUTO_ROOMS_PER_ADDRESS": "-1"},
		"zero auto-room window":     {"FLASHGATE_AUTO_ROOM_WINDOW": "0s"},
		"IPv4 prefix over 32":       {"FLASHGATE_ADDRESS_PREFIX_V4": "33"},
		"IPv6 prefix 0":             {"FLASHGATE_ADDRESS_PREFIX_V6": "0"},
		"IPv6 prefix over 128":      {"FLASHGATE_ADDRESS_PREFIX_V6": "129"},
	} {
		_, err := loadServeEnv(env)
		assert.Error(t, err, name)
	}
}

func TestServeHelpListsEnterLimits(t *testing.T) {
	r := runCLI(t, "", "serve", "-h")
	assert.Equal(t, exitOK, r.code)
	for _, v := range []string{"FLASHGATE_ENTER_PER_USER", "FLASHGATE_ENTER_PER_ADDRESS", "FLASHGATE_ENTER_WINDOW",
		"FLASHGATE_PROXY_HEADER", "FLASHGATE_TRUSTED_PROXIES", "FLASHGATE_STATUS_PER_USER", "FLASHGATE_EXCHANGE_PER_USER",
		"FLASHGATE_LEAVE_PER_USER", "FLASHGATE_COMPLETE_PER_USER", "FLASHGATE_AUTO_ROOMS_PER_ADDRESS",
		"FLASHGATE_AUTO_ROOM_WINDOW", "FLASHGATE_ADDRESS_PREFIX_V4", "FLASHGATE_ADDRESS_PREFIX_V6"} {
		assert.Contains(t, r.stdout, v)
	}
}

// TestServeStreamLimitConfig: the event-stream and connection limits, their
// defaults (the per-address one only with a proxy header, as enter's), and
// the server options they become; a negative value is refused by name.
func TestServeStreamLimitConfig(t *testing.T) {
	c, err := loadServeEnv(map[string]string{})
	require.NoError(t, err)
	o := c.Serve.serverOptions()
	assert.Equal(t, server.DefaultStreamsPerUser, o.StreamsPerUser)
	assert.Zero(t, o.StreamsPerAddress, "no proxy header: every request has the gateway's address")
	assert.Zero(t, o.MaxConnsPerIP)
	assert.Equal(t, server.DefaultConcurrency, o.Concurrency)
	assert.False(t, o.NoMetricsRoute)

	c, err = loadServeEnv(map[string]string{
		"FLASHGATE_STREAMS_PER_USER": "3", "FLASHGATE_STREAMS_PER_ADDRESS": "40", "FLASHGATE_MAX_CONNS_PER_IP": "20",
		"FLASHGATE_CONCURRENCY": "5000", "FLASHGATE_PROXY_HEADER": "X-Real-IP", "FLASHGATE_TRUSTED_PROXIES": "10.0.0.1",
		"FLASHGATE_METRICS_ADDR": "127.0.0.1:9090",
	})
	require.NoError(t, err)
	o = c.Serve.serverOptions()
	assert.Equal(t, 3, o.StreamsPerUser)
	assert.Equal(t, 40, o.StreamsPerAddress)
	assert.Equal(t, 20, o.MaxConnsPerIP)
	assert.Equal(t, 5000, o.Concurrency)
	assert.True(t, o.NoMetricsRoute)

	for _, v := range []string{"FLASHGATE_STREAMS_PER_USER", "FLASHGATE_STREAMS_PER_ADDRESS", "FLASHGATE_MAX_CONNS_PER_IP", "FLASHGATE_CONCURRENCY"} {
		_, err := loadServeEnv(map[string]string{v: "-1"})
		if assert.Error(t, err, v) {
			assert.Contains(t, err.Error(), v)
		}
	}
}

func TestServeAdminTokenMinLength(t *testing.T) {
	for _, tok := range []string{"admin", "readme-admin-token", "0123456789abcdef0123456789abcde"} {
		_, err := loadServeEnv(map[string]string{"FLASHGATE_ADMIN_TOKEN": tok})
		assert.ErrorContains(t, err, "FLASHGATE_ADMIN_TOKEN must be at least 32 bytes", tok)
	}
	for _, tok := range []string{"", "0123456789abcdef0123456789abcdef"} {
		_, err := loadServeEnv(map[string]string{"FLASHGATE_ADMIN_TOKEN": tok})
		assert.NoError(t, err, tok)
	}
	t.Setenv("FLASHGATE_ADMIN_TOKEN", "short-admin-token")
	r := runCLI(t, "", "serve")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "FLASHGATE_ADMIN_TOKEN must be at least 32 bytes, got 17")
}

// TestServeVisitorPlacesPerAddress: in visitor mode without a proxy header,
// one client (the TCP peer) takes at most FLASHGATE_ENTER_PER_ADDRESS
// places per FLASHGATE_ENTER_WINDOW at the defaults: 300 per 10 s, 1,800 a
// minute (docs/security.md#abuse-limits); every cookie-less enter is a new visitor
// with a new place until then.
func TestServeVisitorPlacesPerAddress(t *testing.T) {
	t.Setenv("REDIS_URL", "redis://"+redistest.Start(t).Addr+"/0")
	t.Setenv("FLASHGATE_DEFAULT_ROOM", "open")
	t.Setenv("FLASHGATE_IDENTITY", "visitor")
	t.Setenv("FLASHGATE_INSECURE_COOKIES", "true")
	t.Setenv("FLASHGATE_ACCESS_LOG", "false")
	addr, _, stderr := startServe(t)
	assert.Contains(t, stderr.String(), "visitor mode without FLASHGATE_PROXY_HEADER")

	start := time.Now()
	places := map[string]bool{}
	var refused *http.Response
	for i := 0; i <= server.DefaultEnterPerAddress; i++ {
		resp, err := http.Post("http://"+addr+"/v1/rooms/sale/enter", "application/json", nil)
		require.NoError(t, err)
		var entry struct {
			Token string `json:"waiting_token"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&entry))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			refused = resp
			break
		}
		places[entry.Token] = true
	}
	elapsed := time.Since(start)
	require.Less(t, elapsed, server.DefaultEnterWindow-time.Second, "the enters must fit in one window")
	require.NotNil(t, refused, "all %d cookie-less enters from one address were admitted to the line", len(places))
	assert.Equal(t, http.StatusTooManyRequests, refused.StatusCode)
	assert.NotEmpty(t, refused.Header.Get("Retry-After"))
	assert.Len(t, places, server.DefaultEnterPerAddress, "one place per cookie-less enter, up to the limit")
	t.Logf("%d places from one address in %s, then 429 (per minute: %d)", len(places), elapsed.Round(time.Millisecond),
		len(places)*int(time.Minute/server.DefaultEnterWindow))
}
