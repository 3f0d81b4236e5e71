// Package server is flashgate's HTTP layer (fiber v2): thin handlers over
// Issuer (the calls they make on the issuer, by role: Queue, Admin, Observed), RFC 9457 problem documents
// for every error, and one table (problems.go) mapping error codes to HTTP
// statuses.
//
// # Identity
//
// Users are not authenticated here. By default (Options.Identity "header")
// the platform's gateway authenticates them and passes the user id in a
// trusted header (Options.UserHeader, default X-User-ID), which it must
// strip from client requests; browsers without such a gateway use visitor
// mode (below). Waiting
// tokens ("fgw2_…") are sent as "Authorization: Bearer <token>" or, for
// EventSource clients that cannot set headers, as the waiting_token query
// parameter.
//
// # Browsers: visitor identity and the admission cookie
//
// With Options.Identity "visitor" there is no gateway-provided user: the
// server identifies browsers itself, and the user header is ignored (never
// trusted). On first contact with enter, status, events, leave or exchange
// it sets an HttpOnly visitor cookie, VisitorHostCookie
// ("__Host-flashgate_visitor"; Path=/, SameSite=Lax, Secure, Max-Age 30
// days, host-only; VisitorCookie, "flashgate_visitor", when the cookies are
// not Secure or Options.CookieDomain is set; where the cookie is
// __Host-, a plain flashgate_visitor, which a sibling subdomain or a
// plain-http page can plant, is never read), whose value is
// a random 128-bit id (base64url) "." its HMAC-SHA256 tag (16 bytes,
// base64url) under Options.VisitorKey, which every replica shares. The user
// id is "v_" + the id. A request carrying a valid cookie keeps its id, so
// two tabs of one browser share one place in line; a cookie that is
// malformed, oversized, spelt non-canonically or carries a wrong MAC is
// ignored and replaced by a fresh visitor, as if absent — never an error,
// and never a user id. The per-user enter limit counts valid cookies only.
//
// A successful exchange in visitor mode also sets the admission token as the
// AdmissionCookie ("flashgate_admission", verifier.DefaultCookie, which
// verifier.Middleware reads): HttpOnly, Secure, SameSite=Lax, Path=/,
// Domain Options.CookieDomain if set, Max-Age the token's remaining
// lifetime in whole seconds. The JSON answer is the same as in header mode.
// Options.InsecureCookies drops Secure from both cookies: plain-http
// localhost development only. The admission token's sub is the visitor's
// "v_…" id, and /v1/complete checks no user in visitor mode.
//
// A bot can mint visitors at will (every cookie-less request is a new
// one), so the per-user limit does not bound it: run visitor mode with
// Options.EnterPerAddress (flashgate serve applies it to the TCP peer
// when no ProxyHeader is set), behind a proxy with ProxyHeader and
// TrustedProxies.
// On top, Options.EnterPoW makes a visitor's first enter carry a proof of
// work (pow.go): 428 pow_required with an ALTCHA challenge, then the same
// enter with {"pow": solution}, after which the PoWCookie pass spares the
// rest.
//
// # Endpoints
//
//	method path                              auth              success
//	POST   /v1/rooms/{room}/enter            user header       200 Entry (Retry-After when WAITING)
//	GET    /v1/challenge                     user (visitor)    200 PoW challenge (ALTCHA JSON) with Options.EnterPoW; else 404
//	GET    /v1/rooms/{room}/status           user + waiting    200 Entry (Retry-After when WAITING)
//	GET    /v1/rooms/{room}/events           user + waiting    200 text/event-stream of "status" events
//	GET    /v1/rooms/{room}/beacon           none              200 the room beacon (JWS, public, max-age=1)
//	POST   /v1/rooms/{room}/leave            user + waiting    204
//	POST   /v1/rooms/{room}/exchange         user + waiting    200 {admission_token, admission_id, admission, expires_at_ms, issued_at_ms}
//	POST   /v1/complete?product=…            admission token   200 {state, admission_id, completed_at_ms, repeated}
//	GET    /admin/rooms                      admin             200 {"rooms":[…]}
//	GET    /admin/rooms/{room}               admin             200 RoomConfig
//	PUT    /admin/rooms/{room}               admin             201 created / 200 updated, RoomConfig
//	DELETE /admin/rooms/{room}               admin             200 RoomConfig (deleted_at_ms): close with reason deleted, keys expire retention_ms after
//	POST   /admin/rooms/{room}/open          admin             200 RoomConfig (also /pause)
//	POST   /admin/rooms/{room}/close         admin             200 RoomConfig; optional body {reason: sold_out|closed|event_ended}
//	POST   /admin/rooms/{room}/sold-out      admin             200 RoomConfig: close with reason sold_out
//	POST   /admin/rooms/{room}/revoke        admin             200 {state, admission_id, revoked_at_ms, repeated, banned_until_ms}; body {admission_id} or {user, ban_ms, reason}
//	POST   /admin/rooms/{room}/stop          admin             200 {room, not_before (Unix s, as iat), paused, state, edge_max_age_ms}: refuse admissions issued up to now
//	POST   /admin/rooms/{room}/ban           admin             200 {user, banned_until_ms, banned_at_ms, reason, removed_waiting, revoked_admission_id}; body {user, duration_ms, reason}
//	DELETE /admin/rooms/{room}/ban/{user}    admin             204 (404 not_found: no ban in effect)
//	GET    /admin/rooms/{room}/bans          admin             200 {bans:[{user, banned_until_ms, banned_at_ms, reason}], total, next_cursor}; ?limit=1…1000 (100)&cursor=
//	GET    /admin/rooms/{room}/stats         admin             200 Stats
//	GET    /admin/rooms/{room}/journal?user= admin             200 {room, user, entries:[journal.EntryJSON]} newest first (404 not_found: none; 404 journal_off: no Options.Journal)
//	GET    /admin/rooms/{room}/journal/report admin            200 journal.Report; ?epoch= (404 not_found: nothing journaled; 404 journal_off)
//	GET    /.well-known/jwks.json            -                 200 JWK Set (Cache-Control: public, max-age=60)
//	GET    /.well-known/flashgate-directives.json -          200 {rooms: {room: {not_before}}} (Cache-Control: public, max-age=Options.DirectiveMaxAge)
//	GET    /flashgate-client.js              -                 200 the browser client, an ES module (text/javascript; public, max-age=300, ETag)
//	GET    /wait/{room}?return=…             user (visitor)    200 the waiting page (HTML; enters the user); refusals render as the page with their status
//	POST   /wait/{room}/continue             user (visitor)    303 to the validated return URL (or /) after the exchange: the page's button without JavaScript
//	GET    /wait?room=…&return=…             -                 302 to /wait/{room}, query kept (the worker's FLASHGATE_WAITING_ROOM_URL)
//	GET    /wait/assets/wait.js, wait.css    -                 200 the page's script and styles (public, max-age=300, ETag)
//	GET    /healthz                          -                 200 while the process runs
//	GET    /readyz                           -                 200 when Redis answers and takes writes and keys are loaded, else 503
//	GET    /readyz/replica                   -                 200 while this replica can serve buyers (keys loaded, not shutting down; Redis not consulted), else 503
//	GET    /metrics                          -                 200 Prometheus text format (not with Options.NoMetricsRoute)
//
// Entry members (snake_case, empty ones omitted): room, state, waiting_token,
// arrival, admission_id, admission, admitted_at_ms, expires_at_ms,
// ended_at_ms, banned_until_ms (REVOKED by a ban, while it lasts), reason
// (EXPIRED only: "not_claimed" when the admission was not exchanged within
// the room's arrival window, "session_ended" otherwise), room_state; and,
// exactly when state is WAITING, position,
// ahead, total_waiting, estimated_wait_ms (from the room's measured outflow,
// issuer.Entry.EstimatedWait; −1 = unknown: room paused by the operator, or
// closed, or the place not drawn yet) and poll_after_ms (the issuer's
// jittered poll hint; Retry-After is it in whole seconds, rounded up), and
// opens_at_ms while the room's opening time is still ahead — but while
// pre_queue is true (a shuffle room's pre-queue, the place not drawn yet;
// issuer.Entry.PreQueue) there is no position or ahead. A status of a left
// or superseded token is 200 with state NOT_FOUND.
//
// /v1/complete is for order services not written in Go (Go services use
// verifier.Middleware and package order directly). The expected
// room (the token's product claim) comes from the request — query
// parameter or JSON body field "room", with "product" its deprecated
// alias — never from the token itself; when the user header is present,
// the token's sub must match it. The token is verified offline
// (verifier.Verify with Options.Keys), then consumed atomically in Redis.
//
// The admin API needs "Authorization: Bearer <Options.AdminToken>", compared
// in constant time. With an empty AdminToken the admin API is disabled and
// its routes answer 404 unknown-route. PUT takes {"capacity",
// "rate_per_minute", "session_ms" ("session_seconds" its deprecated alias), "tick_ms", "batch", "state",
// "arrival_window_ms" (0: off), "opens_at_ms", "closes_at_ms" (Unix ms, 0: none;
// or "opens_at", "closes_at" as RFC 3339), "pre_queue" ("fifo"
// or "shuffle": the pre-queue lottery; "prequeue" is its deprecated alias), branding};
// omitted members keep the current value (the default for a new room),
// unknown members and zero values are refused (400).
//
// # Server-sent events
//
// /events sends an "event: status" with the Entry at once, then one every
// poll_after while the entry is WAITING; the first event with another state
// is the last, and the stream closes. Streams are capped at 5 minutes
// (MaxStream), end on Shutdown, and are counted in flashgate_sse_streams_open.
// Each event carries "retry: <poll_after_ms>". EventSource reconnects after
// a stream ends, so clients close it when they see a final state. A failure
// mid-stream is sent as an "event: problem" whose data is the problem
// document, and ends the stream. Per replica, a (room, user) holds at most
// Options.StreamsPerUser streams: one more ends the oldest with a final
// "event: replaced" (retry 30 s, ReplacedRetry); a client address holds at
// most Options.StreamsPerAddress: one more is refused 429 rate_limited; the
// replica holds at most Options.MaxStreams in all: one more (unless it
// replaces one of the same user's) is refused 429 rate_limited too. All
// count in flashgate_sse_streams_limited_total{reason}.
//
// # Errors
//
// Every error is application/problem+json: type
// "https://flashgate.dev/problems/<code with '_' as '-'>", title, status,
// detail, instance, code, plus reason (admission token refusals: the
// verifier's reason, e.g. "expired", "bad_signature"), position
// (not_admitted) and banned_until_ms (banned). 503 answers carry Retry-After: 1 (store_full: 5); internal
// errors are logged and answered with a generic detail. The queue store's
// outages and refusals (unavailable, store_full) are not logged one line per
// request — they are counted in flashgate_store_errors_total{code} — unless
// Redis itself answered with an unexpected error (a script error, READONLY,
// NOAUTH, …); /readyz logs when its answer changes.
//
//	code                     status  when
//	invalid_input            400     malformed room/user id, bad room config, unknown JSON member, missing product
//	malformed_json           400     body is not one JSON object
//	bad_request              400     fiber/fasthttp could not parse the request
//	missing_user             401     the trusted user header is absent (header mode)
//	invalid_waiting_token    401     no or malformed waiting token
//	invalid_admission_token  401     admission token refused by the verifier (+ reason)
//	admin_unauthorized       401     admin token missing or wrong
//	room_closed              403     the room accepts no new entries; exchange of a CLOSED entry
//	banned                   403     enter by a user an operator banned (+ banned_until_ms, Retry-After: the seconds left)
//	token_owner_mismatch     403     a waiting token issued to another user (or room)
//	invite_invalid           403     enter with something that is not a valid invite (malformed, an admission or waiting token, bad signature, unknown key, another issuer)
//	invite_scope             403     enter with a valid invite for another room or user
//	admission_token_scope    403     valid admission token for another product or user (reason bad_product / bad_user)
//	cors_origin_refused      403     a CORS preflight (OPTIONS /v1/…) from an Origin not in Options.CORSOrigins
//	unknown_room             404     no such waiting room (or a deleted one's enter)
//	not_found                404     nothing to leave, unknown admission
//	unknown_route            404     no such route (and the admin API when disabled)
//	journal_off              404     the admin journal routes of a server without a journal (Options.Journal)
//	method_not_allowed       405     the route exists for other methods
//	request_timeout          408     the request line and headers (Options.HeaderTimeout) or the body (BodyTimeout) were not received in time
//	not_admitted             409     exchange while still waiting (+ position, Retry-After)
//	completed                409     revoking a completed admission
//	invite_used              409     enter with a single-use invite someone already used
//	room_not_empty           409     (flashgate restore, no route) restoring over a room with entries in Redis
//	expired                  410     the admission lapsed
//	revoked                  410     an operator revoked the admission
//	invite_expired           410     enter with an invite past its expiry (the room's clock)
//	body_too_large           413     body over Options.BodyLimit (default 16 KiB)
//	unsupported_media_type   415     a body with a Content-Type other than application/json, or compressed (Content-Encoding)
//	rate_limited             429     over a rate limit (+ Retry-After): enter's Options.EnterPerUser / EnterPerAddress / AutoRoomsPerAddress, StatusPerUser, ExchangePerUser, LeavePerUser, CompletePerUser, AdminFailuresPerAddress; events over StreamsPerAddress or MaxStreams
//	headers_too_large        431     request headers over fasthttp's buffer
//	unavailable              503     Redis (or the key set) unavailable; retry
//	store_full               503     Redis over maxmemory refuses a new entry; retry (Retry-After: 5)
//	room_limit               503     an unknown room under the default policy, and the auto rooms are at their limit (Retry-After: 60)
//	room_lost                503     the room's data was lost from Redis and this replica awaits `flashgate restore` (FLASHGATE_LOST_ROOMS=await-restore; Retry-After: 2)
//	not_ready                503     /readyz: Redis down or full (detail says which), or no keys loaded
//	internal                 500     a bug or misconfiguration (never expected)
//
// A request with a method fasthttp does not know at all is answered by fiber
// itself with a plain-text 400.
//
// # Limits
//
// Room and user ids are 1–128 bytes of [A-Za-z0-9._~@+=-] (issuer.ValidID),
// checked after the path is percent-decoded; anything else, in the path or
// the user header, is 400 invalid_input before Redis is asked. Bodies are
// capped at Options.BodyLimit (413), headers at fasthttp's 4 KiB read buffer
// (431). A body must be uncompressed application/json (415: a compressed
// body would be inflated without limit) and one JSON object (400
// malformed_json); unknown members are 400 invalid_input, and the routes
// that take no body (enter, leave, exchange, open/pause/sold-out; close takes an optional reason) accept only
// an empty body or {}. A request that is refused (4xx) changes no state,
// except that a refused completion may record that its admission lapsed.
// A request's line and headers must arrive within Options.HeaderTimeout
// (default 5 s, counted from the connection's start or, on a keep-alive
// connection, from the request's first byte) and its body within
// BodyTimeout (10 s) after that; otherwise it is answered 408
// request_timeout and the connection is closed. Idle keep-alive
// connections are closed after 75 s.
//
// Enter is rate-limited per user id (Options.EnterPerUser) and per client
// address (Options.EnterPerAddress) in fixed windows of Options.EnterWindow
// (Options' zero values disable them; flashgate serve defaults to 30 and
// 300 per 10 s, the per-address one with a proxy header or in visitor
// mode). Enter is idempotent, so in header mode the limits protect Redis:
// a refused client keeps its place in line and retries after Retry-After
// (the seconds left in the window); in visitor mode the per-address one
// bounds the places one address takes. Status, exchange, leave and
// complete are limited per user (Options.StatusPerUser …, same window);
// an enter that creates a room (issuer.Config.DefaultRoom) per client
// address (Options.AutoRoomsPerAddress per AutoRoomWindow); failed admin
// authentications per client address (AdminFailuresPerAddress per
// AdminFailureWindow). Counts are in memory per replica, so with N
// replicas the effective limit is up to N times the configured one. The
// client address is clientAddr's (clientaddr.go): the TCP peer's unless
// Options.ProxyHeader is set and the peer is one of Options.TrustedProxies,
// then the header's right-most entry that is not a trusted proxy; behind
// a gateway or CDN without them, every request has the proxy's address.
// Per-address limits key an IPv6 address on its /64 (AddressPrefixV6).

// # Browsers: CORS and the way back
//
// With Options.CORSOrigins set, pages on those origins may call the /v1
// routes from a browser, credentials included: a request whose Origin is
// listed gets Access-Control-Allow-Origin (that origin),
// Access-Control-Allow-Credentials: true and Access-Control-Expose-Headers:
// Retry-After, problems included; every /v1 answer has Vary: Origin. A
// preflight (OPTIONS /v1/… with Access-Control-Request-Method) from a listed
// origin is answered 204 with Access-Control-Allow-Methods: GET, POST,
// Access-Control-Allow-Headers: Authorization, Content-Type and the user
// header, Access-Control-Max-Age: 600; from any other origin 403
// cors_origin_refused, without CORS headers. /admin, /healthz, /readyz,
// /metrics and the JWKS never carry CORS headers. Without CORSOrigins an
// OPTIONS is 405, as any unsupported method.
//
// /flashgate-client.js is a dependency-free ES module (page/flashgate-client.js,
// embedded) for pages that call the API themselves: createClient({base,
// fetch}) with enter, status, exchange, leave (credentials included; 429
// and 503 retried after Retry-After ±20 %; errors thrown as FlashgateError
// carrying the problem document) and updates, which follows an entry over
// /events or, without EventSource or when it fails, by polling at
// poll_after_ms ±20 %, keeping the last entry and backing off through
// outages.
//
// # The waiting page
//
// GET /wait/{room} (page.go; page/wait.html, wait.js, wait.css embedded,
// no build step) enters the request's user (idempotent: a reload keeps the
// place; the enter limits apply) and renders the answer: waiting (position,
// people ahead, estimated wait, a progress bar from the position at entry),
// paused, opens (before the event window: the time and a countdown), your
// turn (a continue button; with JavaScript the page exchanges at once and
// navigates to the return URL), closed ("Sold out" for reason sold_out,
// "This sale has ended" otherwise: room_closed, or a CLOSED entry; final),
// ended, unknown room (404), reconnecting (503/429 with
// Retry-After: the place is kept) — never a problem document. The return
// query parameter is checked with Server.ReturnURL when rendering; an
// unlisted one is dropped and the page links to "/" instead. Live updates
// come from wait.js over the browser client; without JavaScript a
// <noscript> meta refresh at the poll interval reloads the server-rendered
// state. Every page carries Cache-Control: no-store, a strict
// Content-Security-Policy (default-src, script-src and style-src 'self',
// form-action 'self' plus the return URL's origin, frame-ancestors 'none'),
// X-Content-Type-Options: nosniff, Referrer-Policy: same-origin and
// X-Frame-Options: DENY. Options.PageDir replaces the template with the
// directory's wait.html (a PageView; parsed and tried on a sample at
// startup).
//
// Server.ReturnURL (ReturnPolicy) checks the return URL the edge worker
// adds to its redirect to the waiting page against Options.ReturnOrigins:
// only an absolute http(s) URL on one of those origins, without userinfo,
// backslashes, whitespace or control characters, at most 2048 bytes, is
// accepted, in canonical form.
//
// # Request values
//
// fiber (over fasthttp) is zero-copy: the strings and slices it hands a
// handler alias buffers it reuses for later requests once the handler
// returns. Handlers therefore copy every request value they pass on — room
// and user ids, waiting and admission tokens, the product — where they read
// it (param, header and query in handlers.go, cookie in visitor.go);
// bodies are decoded by encoding/json, which copies; and the issuer copies whatever it keeps
// (invariant 7, docs/concepts.md#invariants). fiber's Immutable option, which copies every
// value fiber hands out, is off: per request it cost two to three times as
// much server CPU and allocations as these copies (docs/performance.md, "Measurements").
//
// # Metrics
//
// flashgate_http_requests_total{route,method,status},
// flashgate_http_request_duration_seconds{route,method} (route is the route
// template, "unmatched" for unknown paths), flashgate_sse_streams_open, and
// per registered room, read with issuer.Stats on each scrape:
// flashgate_room_waiting, flashgate_room_live, flashgate_room_capacity,
// flashgate_room_admitted_total, flashgate_room_completed_total (at most
// 1000 rooms; failures count in flashgate_room_scrape_errors_total).
// flashgate_store_errors_total{code="unavailable"|"store_full"} counts the
// requests and event-stream polls refused because of the queue store. With
// Options.RedisHealth (flashgate serve: the breaker of its Redis client):
// flashgate_redis_up (0 while Redis is known down and commands fail fast),
// flashgate_redis_failures_total (connection-level failures) and
// flashgate_redis_rejected_total (commands failed fast, unsent).
package server
