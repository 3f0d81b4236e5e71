package server

import (
	"errors"
	"log/slog"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/flashgate/flashgate/issuer"
)

// ProblemBase prefixes every problem type URI: the type of code "not_admitted"
// is ProblemBase + "not-admitted".
const ProblemBase = "https://flashgate.dev/problems/"

// Server-level problem codes. They share the table below with issuer.Code.
const (
	codeMissingUser       = "missing_user"
	codeAdminUnauthorized = "admin_unauthorized"
	codeBadAdmission      = "invalid_admission_token"
	codeAdmissionScope    = "admission_token_scope"
	codeBodyTooLarge      = "body_too_large"
	codeUnsupportedMedia  = "unsupported_media_type"
	codeMalformedJSON     = "malformed_json"
	codeUnknownRoute      = "unknown_route"
	codeMethodNotAllowed  = "method_not_allowed"
	codeBadRequest        = "bad_request"
	codeHeadersTooLarge   = "headers_too_large"
	codeRequestTimeout    = "request_timeout"
	codeNotReady          = "not_ready"
)

// storeFullRetryAfter is the Retry-After (seconds) of store_full: memory
// frees at the pace of completions and expiries, not within a second.
const storeFullRetryAfter = 5

// problemKind is one row of the table: the HTTP status and title of a code.
type problemKind struct {
	status int
	title  string
}

// problemTable is THE mapping from error codes (issuer.Code values and the
// server's own codes) to HTTP statuses. Nothing else in flashgate chooses a
// status for an error.
var problemTable = map[string]problemKind{
	// Domain errors (issuer.Code).
	string(issuer.CodeInvalidInput):  {fiber.StatusBadRequest, "Invalid input"},
	string(issuer.CodeUnknownRoom):   {fiber.StatusNotFound, "Unknown waiting room"},
	string(issuer.CodeRoomClosed):    {fiber.StatusForbidden, "Waiting room closed"},
	string(issuer.CodeBadWaiting):    {fiber.StatusUnauthorized, "Invalid waiting token"},
	string(issuer.CodeOwnerMismatch): {fiber.StatusForbidden, "Token owner mismatch"},
	string(issuer.CodeNotFound):      {fiber.StatusNotFound, "Not found"},
	string(issuer.CodeNotAdmitted):   {fiber.StatusConflict, "Not admitted yet"},
	string(issuer.CodeExpired):       {fiber.StatusGone, "Admission expired"},
	string(issuer.CodeRevoked):       {fiber.StatusGone, "Admission revoked"},
	string(issuer.CodeCompleted):     {fiber.StatusConflict, "Admission already completed"},
	string(issuer.CodeUnavailable):   {fiber.StatusServiceUnavailable, "Service unavailable"},
	string(issuer.CodeInternal):      {fiber.StatusInternalServerError, "Internal error"},
	// Redis over maxmemory is temporary (completions, leaves and expiries
	// free memory): 503 with Retry-After like unavailable, not 507 (WebDAV's
	// "cannot store the representation", which clients and CDNs do not retry).
	string(issuer.CodeStoreFull): {fiber.StatusServiceUnavailable, "Queue store full"},
	// Server-level errors.
	codeMissingUser:       {fiber.StatusUnauthorized, "User not identified"},
	codeAdminUnauthorized: {fiber.StatusUnauthorized, "Admin authorization required"},
	codeBadAdmission:      {fiber.StatusUnauthorized, "Invalid admission token"},
	codeAdmissionScope:    {fiber.StatusForbidden, "Admission token not valid for this request"},
	codeBodyTooLarge:      {fiber.StatusRequestEntityTooLarge, "Request body too large"},
	codeUnsupportedMedia:  {fiber.StatusUnsupportedMediaType, "Unsupported media type"},
	codeMalformedJSON:     {fiber.StatusBadRequest, "Malformed JSON"},
	codeUnknownRoute:      {fiber.StatusNotFound, "Unknown route"},
	codeMethodNotAllowed:  {fiber.StatusMethodNotAllowed, "Method not allowed"},
	codeBadRequest:        {fiber.StatusBadRequest, "Bad request"},
	codeHeadersTooLarge:   {fiber.StatusRequestHeaderFieldsTooLarge, "Request headers too large"},
	codeRequestTimeout:    {fiber.StatusRequestTimeout, "Request timeout"},
	codeNotReady:          {fiber.StatusServiceUnavailable, "Not ready"},
	codeRateLimited:       {fiber.StatusTooManyRequests, "Too many requests"},
}

// Problem is an RFC 9457 problem details document. Handlers return it as an
// error; the ErrorHandler renders it.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	// Code is the machine-readable code (the type URI's last segment, with '_').
	Code string `json:"code"`
	// Reason is the verifier's reason for a refused admission token ("expired", …).
	Reason string `json:"reason,omitempty"`
	// Position is the place in line of a not_admitted exchange.
	Position int64 `json:"position,omitempty"`

	retryAfter int   // seconds; 0 = no Retry-After header
	cause      error // logged, never rendered
}

func (p *Problem) Error() string { return p.Code + ": " + p.Detail }

// problem builds the problem for code with the table's status and title.
func problem(code, detail string) *Problem {
	k, ok := problemTable[code]
	if !ok {
		code, k = string(issuer.CodeInternal), problemTable[string(issuer.CodeInternal)]
	}
	p := &Problem{Type: ProblemBase + strings.ReplaceAll(code, "_", "-"), Title: k.title,
		Status: k.status, Detail: detail, Code: code}
	if k.status == fiber.StatusServiceUnavailable {
		p.retryAfter = 1
		if code == string(issuer.CodeStoreFull) {
			p.retryAfter = storeFullRetryAfter
		}
	}
	return p
}

// toProblem turns any handler error into a Problem: domain errors by their
// Code, fiber's own errors by their status, anything else as internal.
func toProblem(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	var de *issuer.Error
	if errors.As(err, &de) {
		switch de.Code {
		case issuer.CodeInternal:
			q := problem(string(de.Code), "internal error")
			q.cause = err
			return q
		case issuer.CodeUnavailable:
			q := problem(string(de.Code), "the queue store is unavailable; retry later")
			q.cause = err
			return q
		case issuer.CodeStoreFull:
			q := problem(string(de.Code), "the queue store is full: no new entries until memory is freed; retry later")
			q.cause = err
			return q
		}
		return problem(string(de.Code), de.Message)
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		switch fe.Code {
		case fiber.StatusNotFound:
			return problem(codeUnknownRoute, "no such route")
		case fiber.StatusMethodNotAllowed:
			return problem(codeMethodNotAllowed, "the route does not accept this method")
		case fiber.StatusRequestEntityTooLarge:
			return problem(codeBodyTooLarge, "the request body exceeds the limit")
		case fiber.StatusUnsupportedMediaType:
			return problem(codeUnsupportedMedia, "send application/json")
		case fiber.StatusRequestHeaderFieldsTooLarge:
			return problem(codeHeadersTooLarge, "the request headers exceed the limit")
		case fiber.StatusRequestTimeout:
			return problem(codeRequestTimeout, "the request was not received in time")
		case fiber.StatusServiceUnavailable:
			return problem(string(issuer.CodeUnavailable), "retry later")
		}
		if fe.Code >= 400 && fe.Code < 500 || fe.Code == fiber.StatusBadGateway {
			// 502 is what fiber reports for a client connection read error.
			return problem(codeBadRequest, "the request could not be read")
		}
	}
	q := problem(string(issuer.CodeInternal), "internal error")
	q.cause = err
	return q
}

// errorHandler is the fiber ErrorHandler: every error response is rendered
// here, as application/problem+json.
func (s *Server) errorHandler(c *fiber.Ctx, err error) error {
	p := toProblem(err)
	s.m.storeError(p.Code)
	if logged(p) {
		lvl := slog.LevelError
		if p.Status == fiber.StatusServiceUnavailable {
			lvl = slog.LevelWarn
		}
		// A handler may keep the record past the request: copies (invariant 7).
		s.log.Log(c.UserContext(), lvl, "request failed", "method", methodLabel(c.Method()),
			"path", strings.Clone(c.Path()), "status", p.Status, "err", p.cause)
	}
	if p.Instance == "" {
		p.Instance = c.Path()
	}
	if p.retryAfter > 0 {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(p.retryAfter))
	}
	switch p.Code {
	case codeAdminUnauthorized:
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="flashgate-admin"`)
	case codeMissingUser:
		// Nothing to add: the user header is set by the gateway, not the client.
	case codeBadAdmission:
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer error="invalid_token"`)
	case string(issuer.CodeBadWaiting):
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="flashgate-waiting"`)
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Status(p.Status)
	return c.JSON(p, "application/problem+json")
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
	case string(issuer.CodeStoreFull):
		return false
	case string(issuer.CodeUnavailable):
		var reply interface{ RedisError() } // go-redis's redis.Error: Redis's own answer
		return errors.As(p.cause, &reply)
	}
	return true
}
