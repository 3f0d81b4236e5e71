package server

import (
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/flashgate/flashgate/problem"
)

// CORSMaxAge is how long a browser may cache a preflight answer (seconds).
const CORSMaxAge = 600

// corsMethods are the methods of the /v1 routes.
const corsMethods = "GET, POST"

// cors is the CORS middleware of the /v1 API (not /admin), on when
// Options.CORSOrigins lists origins. fiber's middleware/cors is not used:
// it answers a preflight from an unlisted origin 204 with the allowed
// methods and headers, and sets Access-Control-Expose-Headers whatever the
// origin; here an unlisted origin gets no CORS header at all, and its
// preflight a 403 problem.
type cors struct {
	origins      map[string]struct{}
	allowHeaders string
}

func newCORS(origins map[string]struct{}, userHeader string) *cors {
	return &cors{origins: origins,
		allowHeaders: fiber.HeaderAuthorization + ", " + fiber.HeaderContentType + ", " + userHeader}
}

// allowed returns the canonical form of the request's Origin when it is
// listed (a browser's Origin is already canonical, RFC 6454 serialisation).
// The string is built anew, no view of the request's buffer.
func (cc *cors) allowed(origin string) (string, bool) {
	if origin == "" {
		return "", false
	}
	canon, err := parseOrigin(origin)
	if err != nil {
		return "", false
	}
	_, ok := cc.origins[canon]
	return canon, ok
}

// handle runs first on every /v1 route: a listed Origin gets its CORS
// headers, any other none.
func (cc *cors) handle(c *fiber.Ctx) error {
	// The answer depends on Origin: shared caches must key on it.
	c.Vary(fiber.HeaderOrigin)
	if origin, ok := cc.allowed(c.Get(fiber.HeaderOrigin)); ok {
		c.Set(fiber.HeaderAccessControlAllowOrigin, origin)
		c.Set(fiber.HeaderAccessControlAllowCredentials, "true")
		c.Set(fiber.HeaderAccessControlExposeHeaders, fiber.HeaderRetryAfter+", "+HeaderBeacon)
	}
	return c.Next()
}

// preflight answers OPTIONS /v1/*: 204 with the methods, headers and
// max-age for a listed Origin, 403 cors_origin_refused for any other, and
// 405 (as without CORS) for an OPTIONS that is no preflight.
func (cc *cors) preflight(c *fiber.Ctx) error {
	if c.Get(fiber.HeaderAccessControlRequestMethod) == "" {
		return fiber.ErrMethodNotAllowed
	}
	c.Vary(fiber.HeaderOrigin, fiber.HeaderAccessControlRequestMethod, fiber.HeaderAccessControlRequestHeaders)
	origin, ok := cc.allowed(c.Get(fiber.HeaderOrigin))
	if !ok {
		return problemFor(problem.CORSOriginRefused, "cross-origin requests are accepted only from the configured origins")
	}
	c.Set(fiber.HeaderAccessControlAllowOrigin, origin)
	c.Set(fiber.HeaderAccessControlAllowCredentials, "true")
	c.Set(fiber.HeaderAccessControlAllowMethods, corsMethods)
	c.Set(fiber.HeaderAccessControlAllowHeaders, cc.allowHeaders)
	c.Set(fiber.HeaderAccessControlMaxAge, strconv.Itoa(CORSMaxAge))
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.SendStatus(fiber.StatusNoContent)
}
