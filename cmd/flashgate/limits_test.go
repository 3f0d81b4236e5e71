package main

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	} {
		_, err := loadServeEnv(env)
		assert.Error(t, err, name)
	}
}

func TestServeHelpListsEnterLimits(t *testing.T) {
	r := runCLI(t, "", "serve", "-h")
	assert.Equal(t, exitOK, r.code)
	for _, v := range []string{"FLASHGATE_ENTER_PER_USER", "FLASHGATE_ENTER_PER_ADDRESS", "FLASHGATE_ENTER_WINDOW",
		"FLASHGATE_PROXY_HEADER", "FLASHGATE_TRUSTED_PROXIES"} {
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
