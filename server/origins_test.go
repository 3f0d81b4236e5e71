package server

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var returnOrigins = []string{"https://shop.example", "http://LOCALHOST:8081", "https://shop.example:8443", "https://[2001:DB8::1]:443"}

func TestReturnPolicy(t *testing.T) {
	p, err := NewReturnPolicy(returnOrigins)
	require.NoError(t, err)
	long := "https://shop.example/" + strings.Repeat("a", MaxReturnURL-len("https://shop.example/"))
	require.Len(t, long, MaxReturnURL)
	for raw, want := range map[string]string{
		// Accepted, in canonical form.
		"https://shop.example":                          "https://shop.example",
		"https://shop.example/":                         "https://shop.example/",
		"https://shop.example/products/sku-1/buy?x=1#f": "https://shop.example/products/sku-1/buy?x=1#f",
		"HTTPS://Shop.Example:443/p":                    "https://shop.example/p",
		"https://shop.example:/p":                       "https://shop.example/p",
		"https://shop.example:8443/p?q=%2F%40":          "https://shop.example:8443/p?q=%2F%40",
		"http://localhost:8081/p":                       "http://localhost:8081/p",
		"https://[2001:db8::1]/cart":                    "https://[2001:db8::1]/cart",
		"https://shop.example/a%20b":                    "https://shop.example/a%20b",
		"https://shop.example//evil.example":            "https://shop.example//evil.example",
		"https://shop.example?":                         "https://shop.example?",
		long:                                            long,
		// Refused.
		"":                                          "",
		"/products/sku-1":                           "",
		"//evil.example":                            "",
		"//shop.example/p":                          "",
		"https:evil":                                "",
		"https:shop.example":                        "",
		"https:/shop.example/p":                     "",
		"https:%2F%2Fevil":                          "",
		"https:%2F%2Fshop.example":                  "",
		"https%3A%2F%2Fshop.example":                "",
		"javascript:alert(1)":                       "",
		"JavaScript://shop.example/%0aalert(1)":     "",
		"data:text/html,<script>":                   "",
		"ftp://shop.example/":                       "",
		"wss://shop.example/":                       "",
		`\\evil.example`:                            "",
		`/\evil.example`:                            "",
		`https:\\evil.example`:                      "",
		`https://shop.example\@evil.example`:        "",
		`https://shop.example/\evil`:                "",
		"https://shop.example@evil.example":         "",
		"https://user:pw@shop.example/":             "",
		"https://@shop.example/":                    "",
		"https://evil.example#@shop.example":        "",
		"https://evil.example?@shop.example":        "",
		"https://evil.example/shop.example":         "",
		"https://shop.example.evil.example/":        "",
		"https://evil.example/https://shop.example": "",
		"https://shop.example%2Eevil.example/":      "",
		"https://shop%2eexample/":                   "",
		"https://shop.example%40evil.example":       "",
		"http://shop.example/":                      "", // another scheme, another origin
		"https://shop.example:8444/":                "",
		"https://shop.example:443443/":              "",
		" https://shop.example/":                    "",
		"https://shop.example/ ":                    "",
		"https://shop.example/a b":                  "",
		"https://shop.example/\t":                   "",
		"\thttps://shop.example/":                   "",
		"https://shop.example/\r\nX: y":             "",
		"https://shop.example/\x00":                 "",
		"https://shop.example/\x7f":                 "",
		"https://shop.example/é":                    "",
		"https://shöp.example/":                     "",
		"https://shop.example/\u2028":               "",
		long + "a":                                  "",
	} {
		got, ok := p.Check(raw)
		assert.Equal(t, want != "", ok, "%q", raw)
		assert.Equal(t, want, got, "%q", raw)
	}

	var zero *ReturnPolicy
	_, ok := zero.Check("https://shop.example/")
	assert.False(t, ok, "nil policy")
	none, err := NewReturnPolicy(nil)
	require.NoError(t, err)
	_, ok = none.Check("https://shop.example/")
	assert.False(t, ok, "no origins")
}

func TestServerReturnURL(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.ReturnOrigins = []string{"https://shop.example"} }))
	got, ok := e.srv.ReturnURL("https://Shop.example/products/sku-1/buy")
	assert.True(t, ok)
	assert.Equal(t, "https://shop.example/products/sku-1/buy", got)
	_, ok = e.srv.ReturnURL("https://shop.example@evil.example/")
	assert.False(t, ok)
	_, ok = newEnv(t).srv.ReturnURL("https://shop.example/")
	assert.False(t, ok, "no ReturnOrigins: nothing accepted")
}

func TestParseOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://shop.example":       "https://shop.example",
		" HTTPS://Shop.Example:443 ": "https://shop.example",
		"http://localhost:80":        "http://localhost",
		"http://127.0.0.1:8080":      "http://127.0.0.1:8080",
		"https://[::1]:8443":         "https://[::1]:8443",
		"https://shop.example/":      "",
		"https://shop.example/p":     "",
		"https://shop.example?x":     "",
		"https://shop.example#":      "",
		"https://u@shop.example":     "",
		"shop.example":               "",
		"//shop.example":             "",
		"ftp://shop.example":         "",
		"https:shop.example":         "",
		"*":                          "",
		"https://*.shop.example":     "",
		"https://shop.example:0":     "",
		"https://shop.example:99999": "",
		"https://shop%2eexample":     "",
		"null":                       "",
		"":                           "",
	} {
		got, err := parseOrigin(in)
		if want == "" {
			assert.Error(t, err, "%q", in)
			continue
		}
		if assert.NoError(t, err, "%q", in) {
			assert.Equal(t, want, got, "%q", in)
		}
	}
}

// FuzzReturnPolicy: whatever is accepted parses back to an allowed origin,
// with no userinfo, no backslash, no control character, within the size
// limit, and is its own canonical form.
func FuzzReturnPolicy(f *testing.F) {
	for _, s := range []string{"https://shop.example/p?q#f", "//evil.example", "https:evil", `/\evil`,
		"https://shop.example@evil.example", "https://evil.example#@shop.example", "https:%2F%2Fevil",
		"javascript:alert(1)", "data:text/html,x", "HTTPS://SHOP.EXAMPLE:443/", "http://localhost:8081/",
		"https://[2001:db8::1]/", "https://shop.example:8443//x", `\\evil.example`} {
		f.Add(s)
	}
	p, err := NewReturnPolicy(returnOrigins)
	require.NoError(f, err)
	allowed := map[string]bool{}
	for _, o := range returnOrigins {
		c, err := parseOrigin(o)
		require.NoError(f, err)
		allowed[c] = true
	}
	f.Fuzz(func(t *testing.T, raw string) {
		out, ok := p.Check(raw)
		if !ok {
			require.Empty(t, out)
			return
		}
		require.LessOrEqual(t, len(out), MaxReturnURL)
		require.True(t, printableASCII(out) && !strings.Contains(out, `\`), "%q", out)
		u, err := url.Parse(out)
		require.NoError(t, err, "%q → %q", raw, out)
		require.Nil(t, u.User, "%q → %q", raw, out)
		require.Empty(t, u.Opaque, "%q → %q", raw, out)
		origin, err := canonicalOrigin(u)
		require.NoError(t, err)
		require.True(t, allowed[origin], "%q → %q: origin %q", raw, out, origin)
		require.True(t, strings.HasPrefix(out, origin), "%q → %q", raw, out)
		again, ok := p.Check(out)
		require.True(t, ok, "%q → %q refused on a second check", raw, out)
		require.Equal(t, out, again)
	})
}
