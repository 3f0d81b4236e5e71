package server

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/limiter"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/problem"
)

// Rate limits.
//
// Enter is idempotent (a repeated enter returns the same place in line), so
// in header mode its limits protect Redis from clients that hammer it. In
// visitor mode every request without a visitor cookie is a new visitor, and
// the per-address limit is what bounds the places one client takes
// (EnterPerAddress per EnterWindow: 1,800 a minute at the defaults).
// Status, exchange, leave and complete have per-user limits of their own
// (StatusPerUser …), far above what a client polling at the advised
// interval sends. All are fixed windows kept in memory, per replica: with N
// issuer replicas behind a load balancer the effective limit is up to N
// times the configured one. The client address is clientAddr's, keyed on
// its prefix (clientaddr.go).

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
	// DefaultEnterWindow is the window of both limits, and of the per-user
	// limits of status, exchange, leave and complete.
	DefaultEnterWindow = 10 * time.Second
	// DefaultStatusPerUser allows a user 60 status requests per 10 s: the
	// shortest poll hint (1 s, jittered down to 0.8 s) is 12.5 per window,
	// so four tabs polling at once stay under it.
	DefaultStatusPerUser = 60
	// DefaultExchangePerUser, DefaultLeavePerUser and
	// DefaultCompletePerUser allow 20 per 10 s: each happens once per
	// admission, retried at most at the 1 s hint.
	DefaultExchangePerUser = 20
	DefaultLeavePerUser    = 20
	DefaultCompletePerUser = 20
	// DefaultAutoRoomsPerAddress allows one client address to create 10
	// rooms (FLASHGATE_DEFAULT_ROOM) per DefaultAutoRoomWindow (1 h).
	DefaultAutoRoomsPerAddress = 10
	DefaultAutoRoomWindow      = time.Hour
	// AdminFailuresPerAddress failed admin authentications per
	// AdminFailureWindow (1 min) from one client address are allowed; past
	// them every admin request from that address, with the right token or
	// not, is answered 429 rate_limited until the window ends.
	AdminFailuresPerAddress = 10
	AdminFailureWindow      = time.Minute
)

// limitKey is the fiber.Ctx local in which a limiter's Next leaves its key
// for its KeyGenerator.
const limitKey = "flashgate.limitKey"

// keyedLimit is fiber's limiter of max requests per window under key(c)'s
// value; a request whose key is "" is not counted (the handler refuses it).
func keyedLimit(max int, window time.Duration, key func(*fiber.Ctx) string, refuse fiber.Handler) fiber.Handler {
	return limiter.New(limiter.Config{
		Max:        max,
		Expiration: window,
		Next: func(c *fiber.Ctx) bool {
			k := key(c)
			c.Locals(limitKey, k)
			return k == ""
		},
		// The limiter keeps the key past the request; fiber's memory
		// storage copies it (TestUserLimitKeysAreCopies).
		KeyGenerator: func(c *fiber.Ctx) string { return c.Locals(limitKey).(string) },
		LimitReached: refuse,
	})
}

// userLimits returns the per-user limiters of status, exchange, leave and
// complete (nil where the option is 0).
func (s *Server) userLimits(opts Options) map[string]fiber.Handler {
	window := opts.EnterWindow
	if window == 0 {
		window = DefaultEnterWindow
	}
	out := map[string]fiber.Handler{}
	for route, max := range map[string]int{"status": opts.StatusPerUser, "exchange": opts.ExchangePerUser,
		"leave": opts.LeavePerUser} {
		if max <= 0 {
			continue
		}
		out[route] = keyedLimit(max, window, s.limitUser, rateLimited(route, "user"))
	}
	return out
}

// completeLimit is complete's limit (Options.CompletePerUser per
// EnterWindow). The token's sub is only known once the token is verified,
// and a limit keyed on the unverified claim let anyone fill a user's
// budget with junk tokens naming it (issue 31). So a completion is counted
// after the handler has checked the token: against its user when the token
// is authentic (noted as minted, or a good signature), against the client
// address when it was refused. Before Redis is asked, a request is refused
// 429 when the user its token names, or its address, has a full window:
// only the user's own verified completions fill the first, only refused
// tokens the second.
type completeLimit struct{ w *windowCounter }

func newCompleteLimit(max int, window time.Duration) *completeLimit {
	if max <= 0 {
		return nil
	}
	if window == 0 {
		window = DefaultEnterWindow
	}
	return &completeLimit{newWindowCounter(max, window)}
}

// refuse is the 429 rate_limited problem when sub ("" : none) or addr has
// a full window, else nil.
func (l *completeLimit) refuse(sub, addr string) error {
	if sub != "" {
		if retry, full := l.w.full("u:" + sub); full {
			return limitProblem("too many complete requests from this user; retry after the Retry-After delay", retry)
		}
	}
	if retry, full := l.w.full(addr); full {
		return limitProblem("too many complete requests with refused tokens from this client address; "+
			"retry after the Retry-After delay", retry)
	}
	return nil
}

// count counts one completion: against sub when its token was authentic,
// else against addr.
func (l *completeLimit) count(sub, addr string, authentic bool) {
	if authentic && sub != "" {
		l.w.add("u:" + sub)
		return
	}
	l.w.add(addr)
}

// completeUser is the sub claim of the request's admission token,
// unverified (completeLimit counts it only once the token is verified),
// "" when there is none.
func completeUser(c *fiber.Ctx) string {
	raw, ok := problem.Bearer(c.Get(fiber.HeaderAuthorization))
	if !ok {
		return ""
	}
	parts := strings.SplitN(raw, ".", 3)
	if len(parts) != 3 || len(parts[1]) > 4096 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var claims struct {
		Sub string `json:"sub"`
	}
	if json.Unmarshal(b, &claims) != nil || !issuer.ValidID(claims.Sub) {
		return ""
	}
	return claims.Sub // decoded: a fresh string
}

// autoRoomGuard counts the enters that create a room (FLASHGATE_DEFAULT_ROOM)
// against the client address's budget (Options.AutoRoomsPerAddress per
// AutoRoomWindow) and refuses them past it with 429 rate_limited. A room
// this replica knows costs nothing; one it does not is looked up once (one
// HGETALL), so only a room that does not exist counts.
func (s *Server) autoRoomGuard(c *fiber.Ctx) error {
	// A room this replica knows (every enter but a room's first ones) is
	// only looked up: fiber's string, not a copy (invariant 7 needs none).
	if s.autoRooms == nil || s.is.Knows(c.Params("room")) {
		return c.Next()
	}
	room := param(c, "room")
	if _, err := s.is.Room(c.UserContext(), room); !errors.Is(err, flashgate.ErrUnknownRoom) {
		return c.Next() // it exists, or the enter reports the error
	}
	if retry, ok := s.autoRooms.take(s.addrKey(c)); !ok {
		return limitProblem("too many new rooms created from this client address; "+
			"retry after the Retry-After delay, or enter a room that exists", retry)
	}
	return c.Next()
}

// adminThrottled refuses (429 rate_limited) every admin request from a
// client address that failed admin authentication AdminFailuresPerAddress
// times in its AdminFailureWindow; nil when it may try.
func (s *Server) adminThrottled(c *fiber.Ctx) (key string, err error) {
	key = s.addrKey(c)
	if retry, full := s.adminFails.full(key); full {
		return key, limitProblem("too many failed admin authentications from this client address; "+
			"retry after the Retry-After delay", retry)
	}
	return key, nil
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
			LimitReached: rateLimited("enter", "user"),
		}))
	}
	if opts.EnterPerAddress > 0 {
		hs = append(hs, limiter.New(limiter.Config{
			Max:          opts.EnterPerAddress,
			Expiration:   window,
			KeyGenerator: func(c *fiber.Ctx) string { return "a:" + s.addrKey(c) },
			LimitReached: rateLimited("enter", "client address"),
		}))
	}
	return hs, nil
}

// rateLimited renders a refusal of the limiter of route, which has
// already set Retry-After to the seconds left in the window.
func rateLimited(route, what string) fiber.Handler {
	detail := "too many " + route + " requests from this " + what + "; retry after the Retry-After delay"
	if route == "enter" {
		detail += " (a repeated enter keeps the same place in line)"
	}
	return func(c *fiber.Ctx) error {
		secs, _ := strconv.Atoi(string(c.Response().Header.Peek(fiber.HeaderRetryAfter)))
		return limitProblem(detail, time.Duration(secs)*time.Second)
	}
}

// limitProblem is the 429 rate_limited problem with Retry-After retry
// (whole seconds, at least 1).
func limitProblem(detail string, retry time.Duration) *Problem {
	p := problemFor(problem.RateLimited, detail)
	p.kind.RetryAfter = int(retryOf(retry) / time.Second)
	return p
}
