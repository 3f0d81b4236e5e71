package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOptionsValidate(t *testing.T) {
	for name, c := range map[string]struct {
		o  Options
		ok bool
	}{
		"zero (every default)":     {Options{}, true},
		"limits and window":        {Options{EnterPerUser: 5, EnterPerAddress: 50, EnterWindow: time.Minute}, true},
		"negative per user":        {Options{EnterPerUser: -1}, false},
		"negative per address":     {Options{EnterPerAddress: -1}, false},
		"negative window":          {Options{EnterWindow: -time.Second}, false},
		"proxy header and proxies": {Options{ProxyHeader: "X-Real-IP", TrustedProxies: []string{"10.0.0.0/8", " 192.0.2.1 ", "2001:db8::/32"}}, true},
		"proxy header alone":       {Options{ProxyHeader: "X-Real-IP"}, false},
		"proxies alone (ignored)":  {Options{TrustedProxies: []string{"10.0.0.1"}}, true},
		"bad proxy":                {Options{ProxyHeader: "X-Real-IP", TrustedProxies: []string{"gateway.internal"}}, false},
		"bad range":                {Options{ProxyHeader: "X-Real-IP", TrustedProxies: []string{"10.0.0.0/40"}}, false},
		"empty proxy entry":        {Options{ProxyHeader: "X-Real-IP", TrustedProxies: []string{"10.0.0.1", ""}}, false},
		"negative timeouts":        {Options{BodyLimit: -1, HeaderTimeout: -1, RedisTimeout: -1}, true},
		"header identity":          {Options{Identity: IdentityHeader}, true},
		"visitor identity":         {Options{Identity: IdentityVisitor, VisitorKey: make([]byte, 32), CookieDomain: "shop.example"}, true},
		"unknown identity":         {Options{Identity: "cookie"}, false},
		"visitor without key":      {Options{Identity: IdentityVisitor}, false},
		"visitor short key":        {Options{Identity: IdentityVisitor, VisitorKey: make([]byte, 31)}, false},
		"bad cookie domain":        {Options{CookieDomain: "shop.example; Secure"}, false},
		"origins":                  {Options{ReturnOrigins: []string{"https://shop.example", "http://localhost:8080"}, CORSOrigins: []string{" https://Shop.example:443 "}}, true},
		"return origin with path":  {Options{ReturnOrigins: []string{"https://shop.example/"}}, false},
		"return origin no scheme":  {Options{ReturnOrigins: []string{"shop.example"}}, false},
		"cors wildcard":            {Options{CORSOrigins: []string{"*"}}, false},
		"cors origin with query":   {Options{CORSOrigins: []string{"https://shop.example?x=1"}}, false},
		"cors empty entry":         {Options{CORSOrigins: []string{"https://shop.example", ""}}, false},
		"cors other scheme":        {Options{CORSOrigins: []string{"chrome-extension://abc"}}, false},
	} {
		err := c.o.Validate()
		if name == "unknown identity" {
			assert.ErrorContains(t, err, `"header" or "visitor"`)
		}
		if c.ok {
			assert.NoError(t, err, name)
		} else {
			assert.Error(t, err, name)
		}
	}
	err := Options{CORSOrigins: []string{"https://shop.example/cart"}}.Validate()
	require.ErrorContains(t, err, `Options.CORSOrigins: "https://shop.example/cart" is not an origin (scheme://host[:port], no path)`)
}
