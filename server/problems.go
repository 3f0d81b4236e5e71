package server

import (
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/problem"
)

// Problem is an RFC 9457 problem details document (problem.Details) on its
// way out. Handlers return it as an error; the ErrorHandler renders it with
// the status, title, Retry-After and WWW-Authenticate of its code's row in
// package problem's table, the only place a code becomes a status.
type Problem struct {
	problem.Details
	kind  problem.Kind
	cause error // logged, never rendered
}

func (p *Problem) Error() string { return p.Code + ": " + p.Detail }

// problemFor builds the problem for code (its row of problem's table; an
// unknown code answers as internal).
func problemFor(code, detail string) *Problem {
	k := problem.Lookup(code)
	return &Problem{Details: *k.New(detail), kind: k}
}

// toProblem turns any handler error into a Problem: domain errors by their
// Code, fiber's own errors by their status, anything else as internal.
func toProblem(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	var de *flashgate.Error
	if errors.As(err, &de) {
		switch de.Code {
		case flashgate.CodeInternal:
			q := problemFor(string(de.Code), "internal error")
			q.cause = err
			return q
		case flashgate.CodeUnavailable:
			q := problemFor(string(de.Code), "the queue store is unavailable; retry later")
			q.cause = err
			return q
		case flashgate.CodeStoreFull:
			q := problemFor(string(de.Code), "the queue store is full: no new entries until memory is freed; retry later")
			q.cause = err
			return q
		}
		return problemFor(string(de.Code), de.Message)
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		switch fe.Code {
		case fiber.StatusNotFound:
			return problemFor(problem.UnknownRoute, "no such route")
		case fiber.StatusMethodNotAllowed:
			return problemFor(problem.MethodNotAllowed, "the route does not accept this method")
		case fiber.StatusRequestEntityTooLarge:
			return problemFor(problem.BodyTooLarge, "the request body exceeds the limit")
		case fiber.StatusUnsupportedMediaType:
			return problemFor(problem.UnsupportedMedia, "send application/json")
		case fiber.StatusRequestHeaderFieldsTooLarge:
			return problemFor(problem.HeadersTooLarge, "the request headers exceed the limit")
		case fiber.StatusRequestTimeout:
			return problemFor(problem.RequestTimeout, "the request was not received in time")
		case fiber.StatusServiceUnavailable:
			return problemFor(string(flashgate.CodeUnavailable), "retry later")
		}
		if fe.Code >= 400 && fe.Code < 500 || fe.Code == fiber.StatusBadGateway {
			// 502 is what fiber reports for a client connection read error.
			return problemFor(problem.BadRequest, "the request could not be read")
		}
	}
	q := problemFor(string(flashgate.CodeInternal), "internal error")
	q.cause = err
	return q
}

// errorHandler is the fiber ErrorHandler: every error response is rendered
// here, as application/problem+json.
func (s *Server) errorHandler(c *fiber.Ctx, err error) error {
	p := toProblem(err)
	s.m.storeError(p.Code)
	if logged(p) {
		// A handler may keep the record past the request: copies (invariant 7).
		s.log.Log(c.UserContext(), logLevel(p.Status), "request failed", "method", methodLabel(c.Method()),
			"path", clipLog(strings.Clone(c.Path())), "status", p.Status, "err", logErr(p))
	}
	if p.Instance == "" {
		p.Instance = c.Path()
	}
	if p.kind.RetryAfter > 0 {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(p.kind.RetryAfter))
	}
	if p.kind.Challenge != "" {
		c.Set(fiber.HeaderWWWAuthenticate, p.kind.Challenge)
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Status(p.Status)
	return c.JSON(&p.Details, problem.ContentType)
}

// logLevel is the level of a logged failure answered with status: ERROR for
// a 5xx (WARN for 503: the queue store, for a moment), DEBUG for a refusal
// (4xx: a refused token, a forged invite — the client's fault, as many a
// second as anyone sends; counted by the metrics, not an operator's alarm).
func logLevel(status int) slog.Level {
	switch {
	case status == fiber.StatusServiceUnavailable:
		return slog.LevelWarn
	case status >= 500:
		return slog.LevelError
	}
	return slog.LevelDebug
}

// logErr is p's cause as logged: a refusal's (4xx) error text is clipped
// (clipLog), since it may quote what the client sent; a 5xx's is whole.
func logErr(p *Problem) any {
	if p.Status >= 500 {
		return p.cause
	}
	return clipLog(p.cause.Error())
}

// maxLogField bounds a logged value a client chooses (a path, a route
// parameter, a refused request's body, an error quoting either), in bytes:
// a longer one is cut (clipLog), so no request writes a log line much
// longer than the fields the server itself picks.
const maxLogField = 256

// clipLog returns s cut to maxLogField bytes (on a UTF-8 boundary) and
// marked with its full length, or s when short enough.
func clipLog(s string) string {
	if len(s) <= maxLogField {
		return s
	}
	cut := maxLogField
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…(" + strconv.Itoa(len(s)) + " bytes)"
}

// logged reports whether p's cause is logged: every internal error, but not
// the queue store's outages and refusals (unavailable, store_full). Those are
// one line per request for as long as Redis is down or full (thousands a
// second), so they are counted instead (flashgate_store_errors_total), and
// their state changes are logged once: Redis down and up again by the
// connection's breaker (internal/redisconn), not ready and ready again by
// /readyz. A Redis error reply behind unavailable (a script error, READONLY,
// NOAUTH, …) is still logged: Redis answered, and something is wrong that
// no probe reports.
func logged(p *Problem) bool {
	if p.cause == nil {
		return false
	}
	switch p.Code {
	case string(flashgate.CodeStoreFull):
		return false
	case string(flashgate.CodeUnavailable):
		var reply interface{ RedisError() } // go-redis's redis.Error: Redis's own answer
		return errors.As(p.cause, &reply)
	}
	return true
}
