package server

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/limiter"

	"github.com/flashgate/flashgate/problem"
)

// Enter rate limits.
//
// Enter is idempotent (a repeated enter returns the same place in line), so
// these limits do not protect fairness: they protect Redis from clients that
// hammer it. They are fixed windows kept in memory by fiber's limiter
// middleware, per replica: with N issuer replicas behind a load balancer the
// effective limit is up to N times the configured one.

// Suggested enter limits: what `flashgate serve` uses unless told otherwise.
// Options' zero values disable the limits.
const (
	// DefaultEnterPerUser allows a user 30 enters per 10 s (3 per second
	// sustained): double clicks, refreshes and a client that re-enters at
	// the shortest poll hint (1 s) never reach it; a script in a loop does.
	DefaultEnterPerUser = 30
	// DefaultEnterPerAddress allows one client address 300 enters per 10 s:
	// many users share an address behind a NAT.
	DefaultEnterPerAddress = 300
	// DefaultEnterWindow is the window of both limits.
	DefaultEnterWindow = 10 * time.Second
)

// proxyConfig validates ProxyHeader and TrustedProxies and returns them in
// the form fiber.Config wants (IPs normalised, so that fiber's string
// comparison with the peer address matches).
func proxyConfig(header string, proxies []string) (string, []string, error) {
	header = strings.TrimSpace(header)
	if header == "" {
		return "", nil, nil
	}
	if len(proxies) == 0 {
		return "", nil, errors.New("server: Options.ProxyHeader needs Options.TrustedProxies " +
			"(the header is believed only from those peers)")
	}
	out := make([]string, 0, len(proxies))
	for _, p := range proxies {
		p = strings.TrimSpace(p)
		if strings.Contains(p, "/") {
			_, n, err := net.ParseCIDR(p)
			if err != nil {
				return "", nil, fmt.Errorf("server: trusted proxy %q is not an IP address or CIDR range", p)
			}
			out = append(out, n.String())
			continue
		}
		ip := net.ParseIP(p)
		if ip == nil {
			return "", nil, fmt.Errorf("server: trusted proxy %q is not an IP address or CIDR range", p)
		}
		out = append(out, ip.String())
	}
	return header, out, nil
}

// enterLimits returns the limiter middleware of POST /v1/rooms/:room/enter:
// per user id first, then per client address, so that one user hammering
// from a shared address exhausts only its own budget, not its neighbours'.
func (s *Server) enterLimits(opts Options) ([]fiber.Handler, error) {
	window := opts.EnterWindow
	if window == 0 {
		window = DefaultEnterWindow
	}
	var hs []fiber.Handler
	if opts.EnterPerUser > 0 {
		hs = append(hs, limiter.New(limiter.Config{
			Max:        opts.EnterPerUser,
			Expiration: window,
			// An absent or invalid user id is refused by the handler without
			// touching Redis; keying on it would only let junk fill memory.
			// In visitor mode a request without a valid visitor cookie
			// gets a fresh id, so only the per-address limit applies.
			Next: func(c *fiber.Ctx) bool { return s.limitUser(c) == "" },
			// The concatenation copies: fiber's strings point into buffers
			// that are reused after the request.
			KeyGenerator: func(c *fiber.Ctx) string { return "u:" + s.limitUser(c) },
			LimitReached: rateLimited("user"),
		}))
	}
	if opts.EnterPerAddress > 0 {
		hs = append(hs, limiter.New(limiter.Config{
			Max:          opts.EnterPerAddress,
			Expiration:   window,
			KeyGenerator: func(c *fiber.Ctx) string { return "a:" + c.IP() },
			LimitReached: rateLimited("client address"),
		}))
	}
	return hs, nil
}

// rateLimited renders a refusal of the limiter, which has already set
// Retry-After to the seconds left in the window.
func rateLimited(what string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		p := problemFor(problem.RateLimited, "too many enter requests from this "+what+
			"; retry after the Retry-After delay (a repeated enter keeps the same place in line)")
		p.kind.RetryAfter, _ = strconv.Atoi(string(c.Response().Header.Peek(fiber.HeaderRetryAfter)))
		if p.kind.RetryAfter < 1 {
			p.kind.RetryAfter = 1
		}
		return p
	}
}
