package problem

import "net/http"

//go:generate go test . -run ^TestErrorsDoc$ -update

// The server's own codes (requests that never reach the domain). The domain
// codes are flashgate.Code values; both share Lookup's table.
const (
	MissingUser       = "missing_user"
	AdminUnauthorized = "admin_unauthorized"
	BadAdmission      = "invalid_admission_token" // a refused admission token (POST /v1/complete)
	AdmissionScope    = "admission_token_scope"   // a valid admission token for another product or user
	BodyTooLarge      = "body_too_large"
	UnsupportedMedia  = "unsupported_media_type"
	MalformedJSON     = "malformed_json"
	UnknownRoute      = "unknown_route"
	MethodNotAllowed  = "method_not_allowed"
	BadRequest        = "bad_request"
	HeadersTooLarge   = "headers_too_large"
	RequestTimeout    = "request_timeout"
	NotReady          = "not_ready"
	RateLimited       = "rate_limited"
	CORSOriginRefused = "cors_origin_refused" // a CORS preflight from an Origin not in the server's list
	PoWRequired       = "pow_required"        // an enter without a valid proof of work (visitor mode, FLASHGATE_ENTER_POW)
)

// The domain codes (flashgate.Code values), spelled here so this package
// stays a leaf; TestDomainCodesInTable holds them equal to flashgate.Codes.
const (
	internal    = "internal"
	unavailable = "unavailable"
	storeFull   = "store_full"
)

// storeFullRetryAfter is the Retry-After (seconds) of store_full: memory
// frees at the pace of completions and expiries, not within a second.
const storeFullRetryAfter = 5

// roomLostRetryAfter is the Retry-After (seconds) of room_lost: a restore
// of a large line takes seconds.
const roomLostRetryAfter = 2

// roomStoppedRetryAfter is the Retry-After (seconds) of room_stopped: the
// default edge directive max-age (FLASHGATE_DIRECTIVE_MAX_AGE).
const roomStoppedRetryAfter = 5

// roomLimitRetryAfter is the Retry-After (seconds) of room_limit.
const roomLimitRetryAfter = 60

const (
	challengeInvalid = `Bearer error="invalid_token"`
	challengeScope   = `Bearer error="insufficient_scope"`
)

// table is THE mapping from codes to HTTP statuses; declared lists its
// codes in the order init declares them (docs/errors.md's order).
var (
	table    = map[string]Kind{}
	declared []string
)

func row(code string, status int, title string, opt ...func(*Kind)) {
	k := Kind{Code: code, Status: status, Title: title}
	if status == http.StatusServiceUnavailable {
		k.RetryAfter = 1
	}
	for _, o := range opt {
		o(&k)
	}
	if _, ok := table[code]; !ok {
		declared = append(declared, code)
	}
	table[code] = k
}

func challenge(c string) func(*Kind) { return func(k *Kind) { k.Challenge = c } }

func init() {
	// Domain errors (flashgate.Code).
	row("invalid_input", http.StatusBadRequest, "Invalid input")
	row("unknown_room", http.StatusNotFound, "Unknown waiting room")
	row("room_closed", http.StatusForbidden, "Waiting room closed")
	// Auto rooms are limited (issuer.Config.MaxAutoRooms); a slot frees when
	// an idle auto room is deleted, so a minute later may succeed.
	row("room_limit", http.StatusServiceUnavailable, "Too many waiting rooms", func(k *Kind) { k.RetryAfter = roomLimitRetryAfter })
	// A ban's own end goes out as Retry-After and banned_until (server).
	row("banned", http.StatusForbidden, "Banned from the waiting room")
	row("invalid_waiting_token", http.StatusUnauthorized, "Invalid waiting token", challenge(`Bearer realm="flashgate-waiting"`))
	row("token_owner_mismatch", http.StatusForbidden, "Token owner mismatch")
	row("not_found", http.StatusNotFound, "Not found")
	row("not_admitted", http.StatusConflict, "Not admitted yet")
	row("expired", http.StatusGone, "Admission expired")
	row("revoked", http.StatusGone, "Admission revoked")
	row("completed", http.StatusConflict, "Admission already completed")
	// An operator's stop (docs/rooms.md#stopping-a-sale-at-the-edge): every
	// admission issued before the room's not_before is refused, at
	// completion and at the edge. 503: the sale is stopped, not the token
	// bad; after Retry-After the buyer goes back to the waiting room.
	row("room_stopped", http.StatusServiceUnavailable, "Waiting room stopped", func(k *Kind) { k.RetryAfter = roomStoppedRetryAfter })
	// Invites (docs/rooms.md#priority-lanes-and-invites): refused before any place changes.
	row("invite_invalid", http.StatusForbidden, "Invalid invite")
	row("invite_scope", http.StatusForbidden, "Invite not valid for this room or user")
	row("invite_expired", http.StatusGone, "Invite expired")
	row("invite_used", http.StatusConflict, "Invite already used")
	// A server without FLASHGATE_JOURNAL_DSN has no journal to ask: the
	// resource does not exist here (like the admin API when disabled), and
	// asking again will not help, so 404 and not a retryable 5xx.
	row("journal_off", http.StatusNotFound, "Journal not configured")
	// flashgate restore over a room that has entries in Redis (no HTTP route answers it today).
	row("room_not_empty", http.StatusConflict, "Room not empty")
	row(unavailable, http.StatusServiceUnavailable, "Service unavailable")
	// Redis over maxmemory is temporary (completions, leaves and expiries
	// free memory): 503 with Retry-After like unavailable, not 507 (WebDAV's
	// "cannot store the representation", which clients and CDNs do not retry).
	row(storeFull, http.StatusServiceUnavailable, "Queue store full", func(k *Kind) { k.RetryAfter = storeFullRetryAfter })
	// A room lost with Redis's data, held for `flashgate restore` (issuer
	// Config.LostRooms = await-restore): the client keeps its place by
	// retrying, so 503 with a Retry-After, like unavailable.
	row("room_lost", http.StatusServiceUnavailable, "Waiting room being restored", func(k *Kind) { k.RetryAfter = roomLostRetryAfter })
	row(internal, http.StatusInternalServerError, "Internal error")
	// Server-level errors.
	row(MissingUser, http.StatusUnauthorized, "User not identified") // set by the gateway: no challenge
	row(AdminUnauthorized, http.StatusUnauthorized, "Admin authorization required", challenge(`Bearer realm="flashgate-admin"`))
	row(BadAdmission, http.StatusUnauthorized, "Invalid admission token", challenge(challengeInvalid))
	row(AdmissionScope, http.StatusForbidden, "Admission token not valid for this request", challenge(challengeScope))
	row(BodyTooLarge, http.StatusRequestEntityTooLarge, "Request body too large")
	row(UnsupportedMedia, http.StatusUnsupportedMediaType, "Unsupported media type")
	row(MalformedJSON, http.StatusBadRequest, "Malformed JSON")
	row(UnknownRoute, http.StatusNotFound, "Unknown route")
	row(MethodNotAllowed, http.StatusMethodNotAllowed, "Method not allowed")
	row(BadRequest, http.StatusBadRequest, "Bad request")
	row(HeadersTooLarge, http.StatusRequestHeaderFieldsTooLarge, "Request headers too large")
	row(RequestTimeout, http.StatusRequestTimeout, "Request timeout")
	row(NotReady, http.StatusServiceUnavailable, "Not ready")
	row(RateLimited, http.StatusTooManyRequests, "Too many requests")
	row(CORSOriginRefused, http.StatusForbidden, "Cross-origin request refused")
	// 428 Precondition Required (RFC 6585 §3): the request lacks what the
	// server requires before it acts; the document carries the challenge to
	// solve (Details.Challenge), and the same request with the solution succeeds.
	row(PoWRequired, http.StatusPreconditionRequired, "Proof of work required")
}

// Lookup returns the row of code; an unknown code gets the "internal" row
// (500), so a missing row can never leak an unintended status.
func Lookup(code string) Kind {
	if k, ok := table[code]; ok {
		return k
	}
	return table[internal]
}

// Known reports whether code has a row of its own.
func Known(code string) bool {
	_, ok := table[code]
	return ok
}

// tokenRow is how one verifier refusal reason is answered: its title, and
// the code (a row of table) whose status and challenge it takes.
type tokenRow struct {
	title string
	as    string
}

// tokens maps the verifier's refusal reasons (verifier.Code.String(), plus
// "missing" for no token at all) to their answer. Scope refusals (another
// product or user) are 403 insufficient_scope (RFC 6750 §3.1); keys that
// cannot be fetched, a stopped room (room_stopped) and edge directives
// never fetched are 503; every other refusal is 401 invalid_token.
var tokens = map[string]tokenRow{
	"missing":           {"Admission token required", BadAdmission},
	"too_large":         {"Admission token too large", BadAdmission},
	"malformed":         {"Malformed admission token", BadAdmission},
	"duplicate_key":     {"Admission token has duplicate JSON members", BadAdmission},
	"unsupported_alg":   {"Admission token algorithm not accepted", BadAdmission},
	"forbidden_header":  {"Admission token has a forbidden header", BadAdmission},
	"bad_type":          {"Not an admission token", BadAdmission},
	"unknown_key":       {"Admission token signed by an unknown key", BadAdmission},
	"bad_signature":     {"Admission token signature invalid", BadAdmission},
	"bad_issuer":        {"Admission token from another issuer", BadAdmission},
	"bad_audience":      {"Admission token for another audience", BadAdmission},
	"bad_product":       {"Admission token for another product", AdmissionScope},
	"bad_user":          {"Admission token for another user", AdmissionScope},
	"invalid_claims":    {"Admission token claims invalid", BadAdmission},
	"expired":           {"Admission token expired", BadAdmission},
	"not_yet_valid":     {"Admission token not yet valid", BadAdmission},
	"lifetime_too_long": {"Admission token lifetime too long", BadAdmission},
	"keys_unavailable":  {"Signing keys unavailable", unavailable},
	"room_stopped":      {"Waiting room stopped", "room_stopped"},
	// A verifier with an edge directive source that has never fetched the
	// document refuses (never fails open) and the client retries.
	"directives_unavailable": {"Edge directives unavailable", unavailable},
}

// Token returns how a refused admission token is answered, by the verifier's
// reason: Code is the server-level code it is reported as (BadAdmission,
// AdmissionScope, or unavailable), with that code's status, Retry-After and
// challenge, and the reason's own title. A missing token (reason "missing")
// is challenged with a bare "Bearer" (RFC 6750 §3.1: no error code when the
// request has no credentials). An unknown reason answers as BadAdmission.
func Token(reason string) Kind {
	r, ok := tokens[reason]
	if !ok {
		r = tokenRow{"Invalid admission token", BadAdmission}
	}
	k := table[r.as]
	k.Title = r.title
	if reason == "missing" {
		k.Challenge = "Bearer"
	}
	return k
}

// TokenDetails is the document verifier.Middleware writes for a refused
// admission token: type Base + "token-" + reason, reason member, no code.
func TokenDetails(reason, detail string) (Kind, *Details) {
	k := Token(reason)
	return k, &Details{Type: TypeURI("token_" + reason), Title: k.Title, Status: k.Status, Detail: detail, Reason: reason}
}
