package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashgate/flashgate/problem"
)

// RequestIDHeader is the request header whose value the access and audit
// logs carry as request_id (set by a gateway or load balancer), when it is
// a short printable token: at most maxRequestID (128) characters of
// [A-Za-z0-9._:-]; anything else is left out.
const RequestIDHeader = "X-Request-ID"

const maxRequestID = 128

// requestID returns c's X-Request-ID when it is a well-formed id, else "".
func requestID(c *fiber.Ctx) string {
	v := c.Request().Header.Peek(RequestIDHeader)
	if len(v) == 0 || len(v) > maxRequestID {
		return ""
	}
	for _, b := range v {
		ok := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' ||
			b == '.' || b == '_' || b == ':' || b == '-'
		if !ok {
			return ""
		}
	}
	return string(v) // a copy: fasthttp reuses the header buffer
}

// accessLog writes the access log line of one answered request (Options.AccessLog):
// level INFO, message "request", attributes method, route (the route
// template, e.g. /v1/rooms/:room/status, or "unmatched": never the raw
// path, never the query string, which may carry a waiting token), room (the
// :room parameter, "" when the route has none), status, duration_ms
// (float, handler time; an event stream's until the stream starts) and
// request_id when the request carries a well-formed X-Request-ID. Tokens,
// user ids and bodies are never logged here.
func (s *Server) accessLog(c *fiber.Ctx, method, route string, status int, d time.Duration) {
	attrs := []slog.Attr{
		slog.String("method", method),
		slog.String("route", route),
		slog.String("room", strings.Clone(roomParam(c, route))),
		slog.Int("status", status),
		slog.Float64("duration_ms", float64(d.Microseconds())/1000),
	}
	if id := requestID(c); id != "" {
		attrs = append(attrs, slog.String("request_id", id))
	}
	s.log.LogAttrs(c.UserContext(), slog.LevelInfo, "request", attrs...)
}

// roomParam is the request's :room parameter, or "" on routes without one
// (and on unmatched requests, whose parameters are not parsed).
func roomParam(c *fiber.Ctx, route string) string {
	if !strings.Contains(route, ":room") {
		return ""
	}
	return c.Params("room")
}

// auditMethods are the admin requests the audit log records: every admin
// route that changes something (reads — GET — are in the access log only).
func audited(method, route string) bool {
	return method != fiber.MethodGet && method != fiber.MethodHead && strings.HasPrefix(route, "/admin/")
}

// secretMember reports whether a request body member is left out of the
// audit log: any name containing token, secret, password or key (case
// insensitive). No admin request body has one today; the rule keeps a
// future one out of the logs.
func secretMember(name string) bool {
	n := strings.ToLower(name)
	for _, s := range [...]string{"token", "secret", "password", "key"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// TokenFingerprint is how the audit log names the admin bearer token a
// request presented: the first 8 hex digits of SHA-256("flashgate admin
// token\x00" ‖ token), "" for no token. The admin token is shared, so this
// tells the current token from a rotated or a wrong one, not one operator
// from another (the audit log's remote address does that, as far as it
// can). It does not protect a guessable token: use a long random one.
func TokenFingerprint(token string) string {
	if token == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("flashgate admin token\x00" + token))
	return hex.EncodeToString(sum[:4])
}

// audit writes the audit log line of one admin request that changes
// something (audited), whatever its outcome, authorised or not: level INFO,
// message "admin audit", attributes remote (the client address: the peer's,
// or Options.ProxyHeader's from a trusted proxy), token_fp
// (TokenFingerprint of the presented bearer token), method, route, room,
// user (the /ban/:user parameter, when the route has it), fields (the
// request body's JSON members, minus secretMember ones, as one JSON
// object string; "" without a body), status, outcome ("ok" for 2xx,
// "refused" for 4xx, "failed" for 5xx), request_id when sent. The time is
// the record's own.
func (s *Server) audit(c *fiber.Ctx, method, route string, status int) {
	tok, _ := problem.Bearer(c.Get(fiber.HeaderAuthorization))
	outcome := "ok"
	switch {
	case status >= 500:
		outcome = "failed"
	case status >= 400:
		outcome = "refused"
	}
	attrs := []slog.Attr{
		slog.String("remote", c.IP()),
		slog.String("token_fp", TokenFingerprint(tok)),
		slog.String("method", method),
		slog.String("route", route),
		slog.String("room", strings.Clone(roomParam(c, route))),
	}
	if strings.Contains(route, ":user") {
		attrs = append(attrs, slog.String("user", strings.Clone(c.Params("user"))))
	}
	attrs = append(attrs, slog.String("fields", auditFields(c.Request().Body())),
		slog.Int("status", status), slog.String("outcome", outcome))
	if id := requestID(c); id != "" {
		attrs = append(attrs, slog.String("request_id", id))
	}
	s.log.LogAttrs(c.UserContext(), slog.LevelInfo, "admin audit", attrs...)
}

// auditFields renders a request body for the audit log: its JSON object's
// members without the secret ones, re-encoded (keys sorted); "" for no
// body; "(not a JSON object)" for a body that is not one (refused anyway).
func auditFields(body []byte) string {
	if len(bytes.TrimSpace(body)) == 0 {
		return ""
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return "(not a JSON object)"
	}
	for k := range m {
		if secretMember(k) {
			delete(m, k)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "(not a JSON object)"
	}
	return string(b)
}
