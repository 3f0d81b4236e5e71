package server

import (
	"crypto/sha256"
	_ "embed" // the browser client
	"encoding/base64"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// clientJS is flashgate-client.js, the browser client (an ES module; its
// tests are page/*.test.mjs, run by TestClientJS under node --test).
//
//go:embed page/flashgate-client.js
var clientJS []byte

// assetMaxAge is the Cache-Control of the static assets (the client, the
// waiting page's script and styles): they change only with a release, and
// carry an ETag for revalidation.
const assetMaxAge = "public, max-age=300"

// asset is a static file served from memory with a strong ETag.
type asset struct {
	body  []byte
	ctype string
	etag  string
}

func newAsset(body []byte, ctype string) *asset {
	sum := sha256.Sum256(body)
	return &asset{body: body, ctype: ctype, etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`}
}

// serve answers the asset, or 304 when If-None-Match names its ETag.
func (a *asset) serve(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, assetMaxAge)
	c.Set(fiber.HeaderETag, a.etag)
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	for _, t := range strings.Split(c.Get(fiber.HeaderIfNoneMatch), ",") {
		if t = strings.TrimSpace(t); t == a.etag || t == "*" {
			return c.SendStatus(fiber.StatusNotModified)
		}
	}
	c.Set(fiber.HeaderContentType, a.ctype)
	return c.Send(a.body)
}

// jsType is the Content-Type of JavaScript (RFC 9239).
const jsType = "text/javascript; charset=utf-8"

var clientAsset = newAsset(clientJS, jsType)

// GET /flashgate-client.js: the browser client, readable from any origin
// (Access-Control-Allow-Origin: *). A page on another origin imports it
// as an ES module (docs/browser.md#the-browser-client), and a module script is
// always fetched in CORS mode: without the header the browser refuses it.
// The file is public and the same for everyone (no credentials are
// allowed or needed: a module import sends none by default), so * reveals
// nothing a plain GET would not — and, unlike echoing the configured
// origins, needs no Vary: Origin on a cached asset. What the client may
// then do cross-origin is still FLASHGATE_CORS_ORIGINS's to decide: the
// /v1 API answers only the listed origins.
func (s *Server) clientJS(c *fiber.Ctx) error {
	c.Set(fiber.HeaderAccessControlAllowOrigin, "*")
	return clientAsset.serve(c)
}
