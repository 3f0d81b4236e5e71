package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/problem"
	"github.com/flashgate/flashgate/verifier"
)

// Entry is the JSON form of issuer.Entry (enter, status, events).
// WAITING-only members (position … poll_after_ms) are present exactly when
// the state is WAITING, but position and ahead are absent while pre_queue
// is set; estimated_wait_ms is the issuer's estimate
// (issuer.Entry.EstimatedWait: from the room's measured outflow), −1 while
// the wait is unknown (room paused by the operator, or closed, or the place
// not drawn yet); opens_at_ms (WAITING only) is the room's opening time
// while it is still ahead, for a countdown.
type Entry struct {
	Room         string `json:"room,omitempty"`
	State        string `json:"state,omitempty"`
	WaitingToken string `json:"waiting_token,omitempty"`
	Arrival      int64  `json:"arrival,omitempty"`
	Position     *int64 `json:"position,omitempty"`
	// PositionEstimated: position interpolated from the replica's room snapshot (issuer/snapshot.go).
	PositionEstimated bool `json:"position_estimated,omitempty"`
	// PreQueue: WAITING in a shuffle room's pre-queue, the place not drawn
	// yet (issuer.Entry.PreQueue); position and ahead are absent then.
	PreQueue        bool   `json:"pre_queue,omitempty"`
	Ahead           *int64 `json:"ahead,omitempty"`
	TotalWaiting    *int64 `json:"total_waiting,omitempty"`
	EstimatedWaitMs *int64 `json:"estimated_wait_ms,omitempty"`
	PollAfterMs     *int64 `json:"poll_after_ms,omitempty"`
	// OpensAtMs: the room's opening time (Unix ms) while still ahead (WAITING only).
	OpensAtMs       int64  `json:"opens_at_ms,omitempty"`
	AdmissionID     string `json:"admission_id,omitempty"`
	AdmissionNumber int64  `json:"admission,omitempty"`
	AdmittedAtMs    int64  `json:"admitted_at_ms,omitempty"`
	ExpiresAtMs     int64  `json:"expires_at_ms,omitempty"`
	EndedAtMs       int64  `json:"ended_at_ms,omitempty"`
	// BannedUntilMs: the end of the user's ban (REVOKED only, while it lasts).
	BannedUntilMs int64 `json:"banned_until_ms,omitempty"`
	// Reason says why an EXPIRED entry ended: "not_claimed" (not exchanged
	// within the room's arrival window) or "session_ended"; why a CLOSED one
	// did: "sold_out", "closed", "event_ended" or "deleted"; absent otherwise.
	Reason string `json:"reason,omitempty"`
	// Lane is the line a WAITING entry waits in: "priority" (entered with an
	// invite, admitted before the public line) or "public"; absent otherwise.
	Lane      string `json:"lane,omitempty"`
	RoomState string `json:"room_state,omitempty"`
	// LotteryCommitment and Receipt (pre_queue only): the room's lottery
	// commitment (SHA-256 hex) and the entry's join receipt, a compact JWS
	// of typ fg-receipt+jwt (issuer.Entry.Receipt; docs/rooms.md#pre-queue-lottery).
	LotteryCommitment string `json:"lottery_commitment,omitempty"`
	Receipt           string `json:"receipt,omitempty"`
}

func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func entryJSON(e *issuer.Entry) Entry {
	return entryWith(e, new([2]int64))
}

// entryWith returns e's JSON form; ms holds the estimated_wait_ms and
// poll_after_ms values it points to (the caller's storage, so that
// renderEntry keeps them on its stack).
func entryWith(e *issuer.Entry, ms *[2]int64) Entry {
	out := Entry{Room: e.Room, State: string(e.State), WaitingToken: e.WaitingToken, Arrival: e.Arrival,
		AdmissionID: e.AdmissionID, AdmissionNumber: e.AdmissionNumber, AdmittedAtMs: unixMs(e.AdmittedAt),
		ExpiresAtMs: unixMs(e.ExpiresAt), EndedAtMs: unixMs(e.EndedAt), BannedUntilMs: unixMs(e.BannedUntil),
		Reason: e.Reason, Lane: e.Lane, RoomState: string(e.RoomState),
		LotteryCommitment: e.LotteryCommitment, Receipt: e.Receipt}
	if e.State == flashgate.StateWaiting {
		ms[0] = -1
		if e.EstimatedWait >= 0 {
			ms[0] = e.EstimatedWait.Milliseconds()
		}
		ms[1] = e.PollAfter.Milliseconds()
		out.TotalWaiting, out.PreQueue = &e.TotalWaiting, e.PreQueue
		if !e.PreQueue {
			out.Position, out.Ahead = &e.Position, &e.Ahead
		}
		out.PositionEstimated = e.PositionEstimated
		out.EstimatedWaitMs, out.PollAfterMs = &ms[0], &ms[1]
		out.OpensAtMs = unixMs(e.OpensAt)
	}
	return out
}

// retryAfter is poll_after in whole seconds, rounded up, at least 1.
func retryAfter(d time.Duration) string { return string(appendRetryAfter(nil, d)) }

// appendRetryAfter appends retryAfter(d) to b.
func appendRetryAfter(b []byte, d time.Duration) []byte {
	return strconv.AppendInt(b, max(1, int64((d+time.Second-1)/time.Second)), 10)
}

// Header names and values of the hot paths (every enter, status and API
// answer), set with ResponseHeader.SetCanonical: fiber's c.Set copies and
// normalizes the name and copies the value on every call.
var (
	hdrCacheControl = []byte(fiber.HeaderCacheControl)
	hdrRetryAfter   = []byte(fiber.HeaderRetryAfter)
	valNoStore      = []byte("no-store")
)

// Handlers read the request through param, header and query, which copy
// (invariant 7, docs/concepts.md#invariants): fiber's strings alias buffers that fasthttp and
// fiber reuse for later requests once the handler returns, and what a
// handler passes on — to the issuer, the verifier, an event stream — may be
// kept longer. Bodies are decoded by encoding/json, which copies too.
// Middleware that only looks at a value during the request reads fiber's
// strings directly. (Why copies here rather than fiber's Immutable: docs/performance.md,
// "Measurements".)

// param returns the route parameter name, copied.
func param(c *fiber.Ctx, name string) string { return strings.Clone(c.Params(name)) }

// header returns the request header name, copied.
func header(c *fiber.Ctx, name string) string { return strings.Clone(c.Get(name)) }

// (cookie, in visitor.go, copies the same way.)

// query returns the query parameter name, copied.
func query(c *fiber.Ctx, name string) string { return strings.Clone(c.Query(name)) }

// user returns the request's user id: in visitor mode the visitor's (never
// an error), else the trusted user id header; its validity is the issuer's
// to judge.
func (s *Server) user(c *fiber.Ctx) (string, error) {
	if s.visitors != nil {
		return s.visitor(c), nil
	}
	u := header(c, s.userHdr)
	if u == "" {
		return "", problemFor(problem.MissingUser, "the "+s.userHdr+" header is missing: requests must pass the platform gateway")
	}
	return u, nil
}

// waitingToken returns the waiting token from "Authorization: Bearer" or,
// for EventSource clients that cannot set headers, the waiting_token query
// parameter. An absent token is left to the issuer (invalid_waiting_token).
func waitingToken(c *fiber.Ctx) string {
	if t, ok := problem.Bearer(header(c, fiber.HeaderAuthorization)); ok {
		return t
	}
	return query(c, "waiting_token")
}

func (s *Server) renderEntry(c *fiber.Ctx, e *issuer.Entry) error {
	if e.State == flashgate.StateWaiting {
		var b [20]byte
		c.Response().Header.SetCanonical(hdrRetryAfter, appendRetryAfter(b[:0], e.PollAfter))
		s.beaconHint(c, e.Room)
	}
	var ms [2]int64
	out := entryWith(e, &ms)
	bp := jsonBuf()
	return sendJSON(c, bp, out.appendJSON(*bp))
}

// enterRequest is the optional body of POST /v1/rooms/:room/enter.
type enterRequest struct {
	// Invite, when present, enters with an invite (issuer.EnterWithInvite):
	// the priority lane, or a bypass admission.
	Invite *string `json:"invite"`
	// PoW is the solution of a pow_required challenge (an ALTCHA payload):
	// a visitor's first enter needs it when Options.EnterPoW is on.
	PoW *string `json:"pow"`
}

// POST /v1/rooms/:room/enter, with no body, {} or {"invite": "<invite token>"},
// and "pow": "<solution>" where a proof of work is required (pow.go).
func (s *Server) enter(c *fiber.Ctx) error {
	u, err := s.user(c)
	if err != nil {
		return err
	}
	var req enterRequest
	if body := c.Body(); len(body) > 0 {
		if err := decodeJSON(body, &req); err != nil {
			return err
		}
	}
	if err := s.powGate(c, u, req.PoW); err != nil {
		return err
	}
	var e *issuer.Entry
	if req.Invite != nil {
		e, err = s.is.EnterWithInvite(c.UserContext(), param(c, "room"), u, *req.Invite)
	} else {
		e, err = s.is.Enter(c.UserContext(), param(c, "room"), u)
	}
	if err != nil {
		return s.bannedProblem(err)
	}
	return s.renderEntry(c, e)
}

// bannedProblem returns err, or for a banned user's refusal the problem
// with the ban's end as banned_until_ms and Retry-After (whole seconds,
// rounded up, at least 1).
func (s *Server) bannedProblem(err error) error {
	var be *issuer.BannedError
	if !errors.As(err, &be) {
		return err
	}
	p := toProblem(err)
	p.BannedUntilMs = be.Until.UnixMilli()
	p.kind.RetryAfter = int(max(1, (be.Until.Sub(s.now())+time.Second-1)/time.Second))
	return p
}

// GET /v1/rooms/:room/status
func (s *Server) status(c *fiber.Ctx) error {
	u, err := s.user(c)
	if err != nil {
		return err
	}
	e, err := s.is.Status(c.UserContext(), param(c, "room"), u, waitingToken(c))
	if err != nil {
		return err
	}
	return s.renderEntry(c, e)
}

// POST /v1/rooms/:room/leave
func (s *Server) leave(c *fiber.Ctx) error {
	u, err := s.user(c)
	if err != nil {
		return err
	}
	if err := s.is.Leave(c.UserContext(), param(c, "room"), u, waitingToken(c)); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// ExchangeResponse is the answer of a successful exchange. ExpiresAtMs and
// IssuedAtMs are the token's exp and iat as Unix ms (whole seconds, as the
// claims are); ExpiresAt and IssuedAt are the same in Unix seconds, their
// deprecated old names, emitted for one release (docs/http-api.md#units).
type ExchangeResponse struct {
	AdmissionToken  string `json:"admission_token"`
	AdmissionID     string `json:"admission_id"`
	AdmissionNumber int64  `json:"admission"`
	ExpiresAtMs     int64  `json:"expires_at_ms"`
	IssuedAtMs      int64  `json:"issued_at_ms"`
	ExpiresAt       int64  `json:"expires_at"`
	IssuedAt        int64  `json:"issued_at"`
}

// POST /v1/rooms/:room/exchange
func (s *Server) exchange(c *fiber.Ctx) error {
	u, err := s.user(c)
	if err != nil {
		return err
	}
	room, tok := param(c, "room"), waitingToken(c)
	a, err := s.is.Exchange(c.UserContext(), room, u, tok)
	var na *issuer.NotAdmittedError
	if errors.As(err, &na) {
		// Report the position and when to retry as data.
		p := toProblem(err)
		p.Position = na.Entry.Position
		p.kind.RetryAfter, _ = strconv.Atoi(retryAfter(na.Entry.PollAfter))
		return p
	}
	if err != nil {
		return err
	}
	if s.visitors != nil {
		s.setAdmissionCookie(c, a.Token, a.ExpiresAt)
	}
	out := ExchangeResponse{AdmissionToken: a.Token, AdmissionID: a.ID, AdmissionNumber: a.Number,
		ExpiresAtMs: a.ExpiresAt.UnixMilli(), IssuedAtMs: a.IssuedAt.UnixMilli(),
		ExpiresAt: a.ExpiresAt.Unix(), IssuedAt: a.IssuedAt.Unix()}
	bp := jsonBuf()
	return sendJSON(c, bp, out.appendJSON(*bp))
}

// CompleteResponse is the answer of /v1/complete.
type CompleteResponse struct {
	State         string `json:"state"`
	AdmissionID   string `json:"admission_id"`
	CompletedAtMs int64  `json:"completed_at_ms"`
	Repeated      bool   `json:"repeated"`
}

type completeRequest struct {
	Room    string `json:"room"`
	Product string `json:"product"` // deprecated alias of room
}

// POST /v1/complete: verify the admission token (room from the request —
// ?room= or the body's room; ?product= and the body's product are
// deprecated aliases — never from the token; user from the trusted header
// when present, never in visitor mode), then consume the admission.
func (s *Server) complete(c *fiber.Ctx) error {
	raw, ok := problem.Bearer(header(c, fiber.HeaderAuthorization))
	if !ok {
		return tokenProblem("missing", "send the admission token as a Bearer token", nil)
	}
	var req completeRequest
	if body := c.Body(); len(body) > 0 {
		if err := decodeJSON(body, &req); err != nil {
			return err
		}
	}
	room, err := completeRoom(query(c, "room"), query(c, "product"), req.Room, req.Product)
	if err != nil {
		return err
	}
	product := room
	// The completion limit (Options.CompletePerUser, ratelimit.go): a
	// user whose verified completions, or an address whose refused
	// tokens, filled the window is refused before Redis is asked.
	var sub, addr string
	if s.completes != nil {
		sub, addr = completeUser(c), "a:"+s.addrKey(c)
		if err := s.completes.refuse(sub, addr); err != nil {
			return err
		}
	}
	done, authentic, err := s.completeToken(c.UserContext(), raw, verifier.Expect{Product: product, User: s.trustedUser(c)})
	if s.completes != nil {
		s.completes.count(sub, addr, authentic)
	}
	if err != nil {
		return err
	}
	out := CompleteResponse{State: string(flashgate.StateCompleted), AdmissionID: done.AdmissionID,
		CompletedAtMs: done.CompletedAt.UnixMilli(), Repeated: done.Repeated}
	bp := jsonBuf()
	return sendJSON(c, bp, out.appendJSON(*bp))
}

// completeRoom returns the one room the completion names: the query's room
// or product (deprecated alias) or the body's room or product; an
// invalid_input problem when none is given or two given ones differ.
func completeRoom(names ...string) (string, error) {
	room := ""
	for _, n := range names {
		if n == "" {
			continue
		}
		if room != "" && n != room {
			return "", problemFor(string(flashgate.CodeInvalidInput), "room is given twice with different values (room, product, query, body)")
		}
		room = n
	}
	if room == "" {
		return "", problemFor(string(flashgate.CodeInvalidInput), "room is required (query parameter or JSON body field)")
	}
	return room, nil
}

// completeToken completes the admission of raw, an admission token, with
// the answer verifier.Verify then issuer.Complete would give, and without the
// Ed25519 arithmetic for a token this issuer minted: after Verify's checks
// up to the signature (Prepare) and of the claims, issuer.CompleteMinted
// completes it if it is byte for byte a token the issuer noted when it
// minted it. Any other token (issuer.ErrNotMinted: forged, altered, minted
// before its note landed, or when Redis could not tell) goes through Verify's
// signature check and then Complete, so a forged token is refused
// (bad_signature) exactly as before — at the cost of one GET in the complete
// script. authentic reports whether raw was shown to be the issuer's (a
// noted token or a good signature), whatever the completion's answer.
// Errors: a refused token's *Problem (refusedToken), the issuer's errors.
func (s *Server) completeToken(ctx context.Context, raw string, want verifier.Expect) (done *flashgate.Completion, authentic bool, err error) {
	p, err := s.verify.Prepare(ctx, raw, want)
	if err != nil {
		return nil, false, refusedToken(err)
	}
	if tok, err := p.InsecureClaims(); err == nil {
		done, err := s.is.CompleteMinted(ctx, tok.Product, tok.User, tok.ID, raw)
		if !errors.Is(err, issuer.ErrNotMinted) {
			s.m.mintedChecks.Inc()
			return done, true, err
		}
	}
	tok, err := p.Verify()
	if err != nil {
		return nil, false, refusedToken(err)
	}
	s.m.signatureChecks.Inc()
	done, err = s.is.Complete(ctx, tok.Product, tok.User, tok.ID)
	return done, true, err
}

// refusedToken is the answer to an admission token verifier.Verify refused
// (err: its error): tokenProblem with the verifier's reason and a detail
// for it.
func refusedToken(err error) *Problem {
	reason := verifier.CodeOf(err).String()
	detail := "the admission token was refused: " + reason
	switch problem.Token(reason).Code {
	case problem.AdmissionScope:
		detail = "the admission token is valid but not for this " + strings.TrimPrefix(reason, "bad_")
	case string(flashgate.CodeUnavailable):
		detail = "the signing keys are unavailable; retry later"
	}
	return tokenProblem(reason, detail, err)
}

// tokenProblem is the answer to a refused admission token: the row
// problem.Token gives the verifier's reason (invalid_admission_token,
// admission_token_scope or unavailable), with the reason member set — the
// same reason verifier.Middleware reports. cause, if any, is logged.
func tokenProblem(reason, detail string, cause error) *Problem {
	k := problem.Token(reason)
	p := &Problem{Details: *k.New(detail), kind: k, cause: cause}
	p.Reason = reason
	return p
}

// decodeJSON decodes one JSON object strictly: unknown members and trailing
// data are refused.
func decodeJSON(body []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		if strings.HasPrefix(err.Error(), "json: unknown field") {
			return problemFor(string(flashgate.CodeInvalidInput), strings.TrimPrefix(err.Error(), "json: "))
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return problemFor(string(flashgate.CodeInvalidInput), "field "+te.Field+" must be a "+te.Type.String())
		}
		return problemFor(problem.MalformedJSON, "the body is not a valid JSON object")
	}
	if err := d.Decode(&struct{}{}); err != io.EOF {
		return problemFor(problem.MalformedJSON, "trailing data after the JSON object")
	}
	return nil
}
