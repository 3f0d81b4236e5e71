package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashgate/flashgate/issuer"
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
// request_id when the request carries a well-formed X-Request-ID; the line's
// time is at, when the answer was rendered. Tokens, user ids and bodies are
// never logged here.
func (s *Server) accessLog(c *fiber.Ctx, at time.Time, method, route string, status int, d time.Duration) {
	// The record goes to the handler directly (what slog.Logger.LogAttrs does, less its
	// runtime.Callers for a source position no access line shows); at is the clock read
	// that ended d, so the line costs no clock read of its own.
	ctx := c.UserContext()
	h := s.log.Handler()
	if !h.Enabled(ctx, slog.LevelInfo) {
		return
	}
	r := slog.NewRecord(at, slog.LevelInfo, "request", 0)
	r.AddAttrs(
		slog.String("method", method),
		slog.String("route", route),
		slog.String("room", clipLog(strings.Clone(roomParam(c, route)))),
		slog.Int("status", status),
		slog.Float64("duration_ms", float64(d.Microseconds())/1000),
	)
	if id := requestID(c); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	_ = h.Handle(ctx, r)
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
// object string; "" without a body; clipped to maxLogField bytes unless
// the outcome is ok — a refused request, unauthenticated ones included,
// changed nothing; room and user too), status, outcome ("ok" for 2xx,
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
	room, fields, fp := strings.Clone(roomParam(c, route)), auditFields(c.Request().Body()), TokenFingerprint(tok)
	logged := fields
	if outcome != "ok" { // changed nothing, and may be anyone's (no token): clipped
		logged = clipLog(fields)
	}
	attrs := []slog.Attr{
		slog.String("remote", remoteString(s.clientAddr(c))),
		slog.String("token_fp", fp),
		slog.String("method", method),
		slog.String("route", route),
		slog.String("room", clipLog(room)),
	}
	user := ""
	if strings.Contains(route, ":user") {
		user = strings.Clone(c.Params("user"))
		attrs = append(attrs, slog.String("user", clipLog(user)))
	}
	attrs = append(attrs, slog.String("fields", logged),
		slog.Int("status", status), slog.String("outcome", outcome))
	if id := requestID(c); id != "" {
		attrs = append(attrs, slog.String("request_id", id))
	}
	s.log.LogAttrs(c.UserContext(), slog.LevelInfo, "admin audit", attrs...)
	if outcome == "ok" && room != "" {
		s.journalAudit(c, method, route, room, user, fields, fp)
	}
}

// journalAudit records a successful admin change of room in the room's
// journal too (issuer.JournalAudit; docs/operations.md#durability): actor "admin
// <token_fp> from <remote>", action auditAction's, detail the audit log's
// fields (plus the user of /ban/:user). A failure is logged (WARN), never
// the request's: the change is made and answered already.
func (s *Server) journalAudit(c *fiber.Ctx, method, route, room, user, fields, fp string) {
	detail := fields
	if detail == "" || detail == "(not a JSON object)" {
		detail = "{}"
	}
	if user != "" {
		var m map[string]any
		_ = json.Unmarshal([]byte(detail), &m)
		if m == nil {
			m = map[string]any{}
		}
		m["user"] = user
		b, _ := json.Marshal(m)
		detail = string(b)
	}
	a := issuer.Audit{Actor: "admin " + fp + " from " + remoteString(s.clientAddr(c)), Action: auditAction(method, route), Detail: json.RawMessage(detail)}
	// The request's own context ends with its handler, before this runs.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.UserContext()), time.Second)
	defer cancel()
	if _, err := s.is.JournalAudit(ctx, room, a); err != nil {
		s.log.Warn("admin audit: not journaled", "room", room, "action", a.Action, "err", err)
	}
}

// auditAction names an admin change for the journal: "configure" (PUT of
// the room), "delete" (DELETE of the room), "unban" (DELETE of a ban), else
// the route's last segment ("open", "pause", "close", "sold-out", "revoke",
// "ban", "invites").
func auditAction(method, route string) string {
	switch {
	case method == fiber.MethodPut && route == "/admin/rooms/:room":
		return "configure"
	case method == fiber.MethodDelete && route == "/admin/rooms/:room":
		return "delete"
	case method == fiber.MethodDelete && strings.HasSuffix(route, "/ban/:user"):
		return "unban"
	}
	return route[strings.LastIndex(route, "/")+1:]
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
