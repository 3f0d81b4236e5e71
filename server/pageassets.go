package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/flashgate/flashgate/issuer"
)

// The waiting page's own assets: the files of Options.PageDir/assets (a
// logo, a favicon, a stylesheet, fonts …), read at startup and served by
// flashgate at /wait/assets/site/{name}, so that the page's CSP (default-src
// 'self') allows them. A room picks its logo, favicon and stylesheet by name
// (issuer.RoomConfig.PageLogo …); the deployment's are logo.*, favicon.*
// and site.css when present.

// MaxPageAsset bounds one page asset, in bytes.
const MaxPageAsset = 1 << 20

// pageAssetTypes are the page assets' Content-Types by extension.
var pageAssetTypes = map[string]string{".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
	".webp": "image/webp", ".gif": "image/gif", ".svg": "image/svg+xml", ".ico": "image/x-icon",
	".css": "text/css; charset=utf-8", ".woff2": "font/woff2"}

// pageAssets are the loaded assets by name.
type pageAssets map[string]*asset

// loadPageAssets reads dir/assets (none: no assets). A file of another
// type, a bad name or one over MaxPageAsset fails startup.
func loadPageAssets(dir string) (pageAssets, error) {
	pa := pageAssets{}
	if dir == "" {
		return pa, nil
	}
	root := filepath.Join(dir, "assets")
	entries, err := os.ReadDir(root)
	if os.IsNotExist(err) {
		return pa, nil
	}
	if err != nil {
		return nil, fmt.Errorf("server: Options.PageDir: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		name := e.Name()
		ctype, ok := pageAssetTypes[strings.ToLower(filepath.Ext(name))]
		if !ok || !issuer.ValidAssetName(name) {
			return nil, fmt.Errorf("server: Options.PageDir: %s: not a page asset (a name of letters, digits, '.', '_', '-' ending in %s)",
				filepath.Join(root, name), ".png .jpg .webp .gif .svg .ico .css .woff2")
		}
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			return nil, fmt.Errorf("server: Options.PageDir: %w", err)
		}
		if len(b) > MaxPageAsset {
			return nil, fmt.Errorf("server: Options.PageDir: %s is over %d bytes", filepath.Join(root, name), MaxPageAsset)
		}
		pa[name] = newAsset(b, ctype)
	}
	return pa, nil
}

// path is the URL of the asset name, "" when there is none.
func (pa pageAssets) path(name string) string {
	if _, ok := pa[name]; !ok || name == "" {
		return ""
	}
	return "/wait/assets/site/" + name
}

// first is the path of the first of names present, "" when none is.
func (pa pageAssets) first(names ...string) string {
	for _, n := range names {
		if p := pa.path(n); p != "" {
			return p
		}
	}
	return ""
}

// GET /wait/assets/site/:name: a page asset, cached like the page's own
// (ETag, 5 min). An SVG opened by itself runs nothing: the asset's CSP
// sandboxes it.
func (s *Server) pageAsset(c *fiber.Ctx) error {
	a, ok := s.assets[param(c, "name")]
	if !ok {
		return fiber.ErrNotFound
	}
	c.Set(fiber.HeaderContentSecurityPolicy, "default-src 'none'; style-src 'unsafe-inline'; sandbox")
	return a.serve(c)
}
