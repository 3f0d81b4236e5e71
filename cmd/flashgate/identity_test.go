package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/server"
)

func TestServeIdentityConfig(t *testing.T) {
	c, err := loadServeEnv(map[string]string{})
	require.NoError(t, err)
	o := c.Serve.serverOptions()
	assert.Equal(t, server.IdentityHeader, o.Identity)
	assert.Empty(t, o.CookieDomain)
	assert.False(t, o.InsecureCookies)
	key, err := c.Serve.visitorKey()
	require.NoError(t, err)
	assert.Nil(t, key)

	c, err = loadServeEnv(map[string]string{
		"FLASHGATE_IDENTITY":         "visitor",
		"FLASHGATE_VISITOR_KEY":      "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
		"FLASHGATE_COOKIE_DOMAIN":    "shop.example",
		"FLASHGATE_INSECURE_COOKIES": "true",
	})
	require.NoError(t, err)
	o = c.Serve.serverOptions()
	assert.Equal(t, server.IdentityVisitor, o.Identity)
	assert.Equal(t, "shop.example", o.CookieDomain)
	assert.True(t, o.InsecureCookies)
	key, err = c.Serve.visitorKey()
	require.NoError(t, err)
	assert.Equal(t, []byte("0123456789abcdef0123456789abcdef"), key)
	o.VisitorKey = key
	require.NoError(t, o.Validate())

	// Visitor mode without a key is valid: serve derives it.
	_, err = loadServeEnv(map[string]string{"FLASHGATE_IDENTITY": "visitor"})
	require.NoError(t, err)

	for name, env := range map[string]map[string]string{
		"unknown identity":   {"FLASHGATE_IDENTITY": "cookie"},
		"short visitor key":  {"FLASHGATE_IDENTITY": "visitor", "FLASHGATE_VISITOR_KEY": "c2hvcnQ="},
		"visitor key no b64": {"FLASHGATE_VISITOR_KEY": "!!!"},
		"bad cookie domain":  {"FLASHGATE_COOKIE_DOMAIN": "shop.example; Secure"},
		"bad insecure flag":  {"FLASHGATE_INSECURE_COOKIES": "maybe"},
	} {
		_, err := loadServeEnv(env)
		assert.Error(t, err, name)
	}
	_, err = loadServeEnv(map[string]string{"FLASHGATE_IDENTITY": "cookie"})
	assert.ErrorContains(t, err, "header or visitor")
}

// TestServeEnterPoWConfig: FLASHGATE_ENTER_POW reaches the server's
// options in visitor mode; out of range or in header mode it is refused.
func TestServeEnterPoWConfig(t *testing.T) {
	c, err := loadServeEnv(map[string]string{})
	require.NoError(t, err)
	assert.Zero(t, c.Serve.serverOptions().EnterPoW, "off by default")
	c, err = loadServeEnv(map[string]string{"FLASHGATE_IDENTITY": "visitor", "FLASHGATE_ENTER_POW": "15"})
	require.NoError(t, err)
	assert.Equal(t, 15, c.Serve.serverOptions().EnterPoW)
	for name, env := range map[string]map[string]string{
		"header mode":  {"FLASHGATE_ENTER_POW": "15"},
		"negative":     {"FLASHGATE_IDENTITY": "visitor", "FLASHGATE_ENTER_POW": "-1"},
		"too hard":     {"FLASHGATE_IDENTITY": "visitor", "FLASHGATE_ENTER_POW": "27"},
		"not a number": {"FLASHGATE_IDENTITY": "visitor", "FLASHGATE_ENTER_POW": "on"},
	} {
		_, err := loadServeEnv(env)
		assert.ErrorContains(t, err, "ENTER_POW", name)
	}
}

func TestDeriveVisitorKey(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("flashgate visitor v1"))
	k := deriveVisitorKey(secret)
	assert.Equal(t, m.Sum(nil), k)
	assert.Len(t, k, server.MinVisitorKey)
	assert.NotEqual(t, k, deriveVisitorKey(append([]byte("x"), secret[1:]...)))
	assert.Equal(t, k, deriveVisitorKey(secret), "every replica derives the same key")
}

func TestServeHelpListsIdentity(t *testing.T) {
	r := runCLI(t, "", "serve", "-h")
	assert.Equal(t, exitOK, r.code)
	for _, v := range []string{"FLASHGATE_IDENTITY", "FLASHGATE_VISITOR_KEY", "FLASHGATE_COOKIE_DOMAIN", "FLASHGATE_INSECURE_COOKIES", "FLASHGATE_ENTER_POW"} {
		assert.Contains(t, r.stdout, v)
	}
}
