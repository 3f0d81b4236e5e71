package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServeOriginsConfig(t *testing.T) {
	c, err := loadServeEnv(map[string]string{})
	require.NoError(t, err)
	assert.Empty(t, c.Serve.ReturnOrigins)
	assert.Empty(t, c.Serve.CORSOrigins)
	assert.Empty(t, c.Serve.serverOptions().CORSOrigins)

	c, err = loadServeEnv(map[string]string{
		"FLASHGATE_RETURN_ORIGINS": "https://shop.example, http://localhost:3000",
		"FLASHGATE_CORS_ORIGINS":   "https://shop.example,https://m.shop.example:8443",
	})
	require.NoError(t, err)
	o := c.Serve.serverOptions()
	assert.Equal(t, []string{"https://shop.example", "http://localhost:3000"}, o.ReturnOrigins)
	assert.Equal(t, []string{"https://shop.example", "https://m.shop.example:8443"}, o.CORSOrigins)
	require.NoError(t, o.Validate())

	for name, c := range map[string]struct{ env, msg string }{
		"return origin with a path": {"FLASHGATE_RETURN_ORIGINS", "https://shop.example/cart"},
		"return origin no scheme":   {"FLASHGATE_RETURN_ORIGINS", "shop.example"},
		"return empty entry":        {"FLASHGATE_RETURN_ORIGINS", "https://shop.example,,"},
		"cors wildcard":             {"FLASHGATE_CORS_ORIGINS", "*"},
		"cors trailing slash":       {"FLASHGATE_CORS_ORIGINS", "https://shop.example/"},
		"cors javascript":           {"FLASHGATE_CORS_ORIGINS", "javascript:alert(1)"},
	} {
		_, err := loadServeEnv(map[string]string{c.env: c.msg})
		if assert.Error(t, err, name) {
			assert.Contains(t, err.Error(), c.env+":", name)
			assert.Contains(t, err.Error(), "is not an origin (scheme://host[:port], no path)", name)
		}
	}

	r := runCLI(t, "", "serve", "-h")
	assert.Equal(t, exitOK, r.code)
	assert.Contains(t, r.stdout, "FLASHGATE_RETURN_ORIGINS")
	assert.Contains(t, r.stdout, "FLASHGATE_CORS_ORIGINS")
}
