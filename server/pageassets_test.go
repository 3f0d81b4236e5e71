package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/issuer"
)

// TestPageSiteAssets: the files of Options.PageDir/assets are served by
// flashgate under the page's CSP; the deployment's logo and favicon show
// on every room's page, a room picks its own by name, its own template
// ({name}.html beside wait.html), and its image origins join the CSP's
// img-src.
func TestPageSiteAssets(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, PageTemplate), mustRead("page/"+PageTemplate), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "assets"), 0o700))
	for name, body := range map[string]string{"logo.svg": `<svg xmlns="http://www.w3.org/2000/svg"/>`, "favicon.ico": "ico",
		"spring.png": "\x89PNG", "site.css": "main{border:1px solid}"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "assets", name), []byte(body), 0o600))
	}
	// A room's own template: spring.html beside wait.html.
	spring := strings.Replace(string(mustRead("page/"+PageTemplate)), "<body>", `<body><p class="banner">{{.T "state.waiting.heading"}} – Spring</p>`, 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "spring.html"), []byte(spring), 0o600))
	e := newEnv(t, visitorMode(), withOptions(func(o *Options) { o.PageDir = dir }))
	plain := e.room(issuer.RoomConfig{Capacity: 100})
	r := e.page(plain, "", "")
	require.Equal(t, 200, r.status, "%s", r.body)
	assertPageHeaders(t, r)
	body := string(r.body)
	assert.Contains(t, body, `<img class="logo" id="logo" src="/wait/assets/site/logo.svg" alt="">`)
	assert.Contains(t, body, `<link rel="icon" href="/wait/assets/site/favicon.ico">`)
	assert.Contains(t, body, `<link rel="stylesheet" href="/wait/assets/site/site.css">`)
	assert.Contains(t, r.header.Get("Content-Security-Policy"), "img-src 'self' data:;")

	assert.NotContains(t, body, "– Spring")
	springRoom := e.room(issuer.RoomConfig{Capacity: 100, PageLogo: "spring.png", PageImageOrigins: []string{"https://cdn.shop.example"},
		PageTemplate: "spring"})
	r = e.page(springRoom, "", "")
	assert.Contains(t, string(r.body), `<p class="banner">You are in line – Spring</p>`)
	assert.Contains(t, string(r.body), `<img class="logo" id="logo" src="/wait/assets/site/spring.png" alt="">`)
	assert.Contains(t, r.header.Get("Content-Security-Policy"), "img-src 'self' data: https://cdn.shop.example;")

	a := e.do(req{method: "GET", path: "/wait/assets/site/logo.svg"})
	require.Equal(t, 200, a.status)
	assert.Equal(t, "image/svg+xml", a.header.Get("Content-Type"))
	assert.Contains(t, a.header.Get("Content-Security-Policy"), "sandbox")
	assert.NotEmpty(t, a.header.Get("ETag"))
	assert.Equal(t, 404, e.do(req{method: "GET", path: "/wait/assets/site/nothing.png"}).status)

	// The admin API checks names and origins.
	for _, bad := range []string{`{"page_logo":"../x.png"}`, `{"page_template":"a/b"}`, `{"page_image_origins":["http://cdn.example"]}`,
		`{"page_image_origins":["https://cdn.example/path"]}`, `{"page_image_origins":["https://a.example; script-src *"]}`} {
		assert.Equal(t, 400, e.admin("PUT", "/admin/rooms/"+springRoom, bad).status, bad)
	}
	// A broken room template fails startup, and so does a file that is no page asset.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "broken.html"), []byte("{{.Nope"), 0o600))
	assert.ErrorContains(t, Options{PageDir: dir}.Validate(), "broken.html")
	require.NoError(t, os.Remove(filepath.Join(dir, "broken.html")))
	// A file that is no page asset fails startup.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "assets", "run.sh"), []byte("#!"), 0o600))
	assert.ErrorContains(t, Options{PageDir: dir}.Validate(), "not a page asset")
}
