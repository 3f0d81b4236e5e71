package server

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// openAPIDoc is the OpenAPI 3.1 description of the HTTP API, served at
// GET /openapi.json. openapi_test.go holds it to the router (every route
// described, every described route registered) and validates the HTTP
// tests' responses against it.
//
//go:embed openapi.json
var openAPIDoc []byte

// openAPIETag is the document's strong ETag (its SHA-256, truncated).
var openAPIETag = func() string {
	sum := sha256.Sum256(openAPIDoc)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}()

// OpenAPI returns the OpenAPI 3.1 document of the HTTP API (a copy).
func OpenAPI() []byte { return append([]byte(nil), openAPIDoc...) }

// openapi serves the document: cacheable, with an ETag that a matching
// If-None-Match turns into 304.
func (s *Server) openapi(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "public, max-age=300")
	c.Set(fiber.HeaderETag, openAPIETag)
	if inm := c.Get(fiber.HeaderIfNoneMatch); inm != "" && etagMatch(inm, openAPIETag) {
		return c.SendStatus(fiber.StatusNotModified)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(openAPIDoc)
}

// etagMatch reports whether an If-None-Match value (a list of entity tags,
// or "*") matches tag, by weak comparison (RFC 9110 §13.1.2).
func etagMatch(inm, tag string) bool {
	for t := range strings.SplitSeq(inm, ",") {
		if t = strings.TrimSpace(t); t == "*" || t == tag || t == "W/"+tag {
			return true
		}
	}
	return false
}
