package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/compress"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/problem"
	"github.com/flashgate/flashgate/verifier"
)

// KeyRing is what the server needs from the key ring (keys.Ring and
// keys.FileRing implement it): signing admission tokens, resolving kids to
// verify them on /v1/complete, and the public JWK Set for
// /.well-known/jwks.json.
type KeyRing interface {
	issuer.Signer   // Sign(payload []byte) (string, error)
	verifier.KeySet // PublicKey(ctx, kid) (ed25519.PublicKey, error)
	// PublicJWKS returns the public JWK Set JSON document.
	PublicJWKS() ([]byte, error)
}

// Defaults for Options.
const (
	DefaultUserHeader = "X-User-ID"
	DefaultBodyLimit  = 16 << 10
	// MaxStream is the longest a server-sent events stream stays open; the
	// client's EventSource reconnects after it.
	MaxStream = 5 * time.Minute
	// DefaultHeaderTimeout is the default Options.HeaderTimeout.
	DefaultHeaderTimeout = 5 * time.Second
	// BodyTimeout is how long a request's body may take once its headers
	// are in (bodies are at most Options.BodyLimit, 16 KiB by default).
	BodyTimeout = 10 * time.Second
	// DefaultRedisTimeout is the default Options.RedisTimeout.
	DefaultRedisTimeout = time.Second
	// DefaultDirectiveMaxAge is the default Options.DirectiveMaxAge.
	DefaultDirectiveMaxAge = 5 * time.Second
	// DefaultConcurrency is what a zero Options.Concurrency means: fiber's
	// (and fasthttp's) default, 256 × 1024 connections served at once.
	DefaultConcurrency = fiber.DefaultConcurrency
	// MinAdminToken is the shortest admin token flashgate serve accepts, in
	// bytes (FLASHGATE_ADMIN_TOKEN).
	MinAdminToken = 32
)

// Options configures a Server.
type Options struct {
	// Issuer is the domain core the handlers wrap (an *issuer.Issuer).
	// Required.
	Issuer Issuer
	// Keys signs and verifies admission tokens and publishes the JWKS. Required.
	Keys KeyRing
	// AdminToken is the bearer token of the admin API (/admin/...). Empty
	// disables the admin API: its routes answer 404 unknown-route.
	AdminToken string
	// UserHeader is the trusted request header carrying the user id. The
	// platform's gateway authenticates the user and sets it; it must strip
	// the header from client requests. Default "X-User-ID".
	UserHeader string
	// Identity is how requests name their user: IdentityHeader ("header",
	// the default; "" means it) trusts UserHeader; IdentityVisitor
	// ("visitor") identifies browsers by a signed HttpOnly visitor cookie
	// (VisitorCookie) the server sets on first contact, ignores UserHeader,
	// and on a successful exchange also sets the admission token as the
	// AdmissionCookie (package doc, "Browsers").
	Identity string
	// VisitorKey is the HMAC key of visitor cookies: at least MinVisitorKey
	// (32) bytes, the same on every replica. Required in visitor mode.
	VisitorKey []byte
	// CookieDomain is the Domain attribute of the admission cookie (visitor
	// mode), e.g. "shop.example" to reach the shop's hosts; empty: host-only.
	CookieDomain string
	// InsecureCookies drops the Secure attribute of the visitor and
	// admission cookies: for plain-http localhost development only.
	InsecureCookies bool
	// EnterPoW, in visitor mode, is the difficulty in bits (0 = off, at
	// most MaxEnterPoW) of the proof of work a visitor's first enter must
	// carry (pow.go): 2^(EnterPoW−1) SHA-256 on average for the client, one
	// SHA-256 and one HMAC for the server. Its key is derived from
	// VisitorKey, so replicas agree.
	EnterPoW int
	// BodyLimit is the largest request body in bytes (default 16 KiB).
	BodyLimit int
	// HeaderTimeout is the longest a client may take to send a request's
	// line and headers, counted from the connection's start (or, on a
	// keep-alive connection, from the request's first byte); a request
	// still incomplete then is answered 408 request_timeout and its
	// connection closed. Its body then has BodyTimeout (10 s). Zero means
	// DefaultHeaderTimeout (5 s).
	HeaderTimeout time.Duration
	// RedisTimeout bounds how long one API request waits for the queue store
	// (the deadline of the context its issuer calls get); past it the request
	// is answered 503 unavailable with Retry-After, so a Redis that accepts
	// connections and never answers (hung, SIGSTOP) costs a client at most
	// this long. A request that used its whole budget also counts towards
	// opening the Redis breaker (internal/redisconn), after which requests
	// fail within microseconds. Zero means DefaultRedisTimeout (1 s);
	// negative: no bound but go-redis's own timeouts. Needs a client that
	// honours context deadlines (go-redis ContextTimeoutEnabled; redisconn.Open
	// sets it).
	RedisTimeout time.Duration
	// EnterPerUser is how many POST /v1/rooms/{room}/enter requests one user
	// id (the trusted user header, across rooms) may send per EnterWindow;
	// more are answered 429 rate_limited with Retry-After. 0 disables it
	// (flashgate serve sets DefaultEnterPerUser). The count is kept in memory
	// per replica (see ratelimit.go).
	EnterPerUser int
	// EnterPerAddress is the same limit per client address (see ProxyHeader
	// and AddressPrefixV6); 0 disables it. Behind a gateway or CDN, set
	// ProxyHeader and TrustedProxies first: otherwise every request has the
	// proxy's address and all users share one budget.
	EnterPerAddress int
	// EnterWindow is the fixed window of both enter limits and of the
	// per-user limits below, in whole seconds (rounded up); default 10 s.
	EnterWindow time.Duration
	// StreamsPerUser is how many event streams (GET
	// /v1/rooms/{room}/events) one user may hold open in one room on this
	// replica; opening one more ends the oldest with a final "replaced"
	// event (sse.go). 0 disables it (flashgate serve sets
	// DefaultStreamsPerUser).
	StreamsPerUser int
	// StreamsPerAddress is how many event streams one client address (see
	// ProxyHeader) may hold open on this replica; one more is refused 429
	// rate_limited. 0 disables it (flashgate serve sets
	// DefaultStreamsPerAddress when FLASHGATE_PROXY_HEADER is set).
	StreamsPerAddress int
	// MaxStreams is how many event streams this replica holds open at
	// most, in total: each costs memory (about 40 KB, docs/sizing.md
	// m_stream), so the replica's memory limit divided by that, less a
	// margin. One more is refused 429 rate_limited (the waiting page then
	// polls status) unless it replaces a stream of the same user and room.
	// 0: no limit. flashgate_sse_streams_limit exports it.
	MaxStreams int
	// MaxConnsPerIP is fasthttp's Server.MaxConnsPerIP: the most concurrent
	// connections from one TCP peer address (never ProxyHeader's address:
	// behind a proxy, that peer is the proxy); more are closed at accept.
	// 0: no limit.
	MaxConnsPerIP int
	// Concurrency is fasthttp's Server.Concurrency: the most connections
	// served at once (an event stream counts until its first event, when
	// it is handed over: MaxStreams bounds open streams); more are answered
	// 503 by fasthttp and closed. 0: DefaultConcurrency.
	Concurrency int
	// NoMetricsRoute leaves /metrics off the app (it answers 404): serve
	// Server.MetricsHandler on a listener of its own instead.
	NoMetricsRoute bool
	// DirectiveMaxAge is the Cache-Control max-age of the edge directive
	// document (GET /.well-known/flashgate-directives.json), in whole
	// seconds (rounded down, at least 1 s): a stop reaches edge verifiers
	// within it plus one fetch. 0 means DefaultDirectiveMaxAge (5 s).
	DirectiveMaxAge time.Duration
	// Beacon says when a WAITING answer (enter, status) asks its page to
	// poll the room beacon (GET /v1/rooms/{room}/beacon, cacheable by a CDN)
	// instead of its status, with the Flashgate-Beacon header: BeaconAuto
	// ("auto", the default "") while this replica holds MaxStreams event
	// streams, BeaconAlways, or BeaconOff (roombeacon.go).
	Beacon string
	// ProxyHeader names the header carrying the client address, set by a
	// proxy in front of flashgate (e.g. "X-Forwarded-For", "Forwarded"
	// (RFC 7239), "X-Real-IP", "CF-Connecting-IP"). It is believed only when
	// the immediate peer is one of TrustedProxies, and read from the right:
	// the client address is the right-most entry that is not a trusted
	// proxy, never what the client wrote to the left of it, however it is
	// spelled (X-Forwarded-For has no quoting; Forwarded's for= elements).
	// From a trusted peer without the header: the peer's address; a header
	// that names no address where the walk reaches, or only trusted
	// proxies: no address, keyed and logged as "unknown" (UnknownAddr),
	// never the proxy's (clientaddr.go). Empty: the peer's address.
	ProxyHeader string
	// TrustedProxies are the IP addresses and CIDR ranges of the proxies
	// whose ProxyHeader is believed, and skipped in its list. Required with
	// ProxyHeader.
	TrustedProxies []string
	// AddressPrefixV4 and AddressPrefixV6 are the prefix lengths, in bits,
	// on which the per-address limits are keyed: every address of one
	// prefix shares one budget (an IPv4-mapped IPv6 address counts as its
	// IPv4 address). 0: DefaultAddressPrefixV4 (32) and
	// DefaultAddressPrefixV6 (64, what one subscriber is given); 1 … 32 and
	// 1 … 128.
	AddressPrefixV4, AddressPrefixV6 int
	// StatusPerUser, ExchangePerUser, LeavePerUser and CompletePerUser are
	// how many status, exchange, leave and complete requests one user (the
	// user header or visitor cookie; for complete, the admission token's
	// sub, counted once the token is verified, and refused tokens against
	// the client address: completeLimit) may send per EnterWindow (every
	// event stream open counts as a status); more are answered 429 rate_limited
	// with Retry-After. 0 disables each (flashgate serve sets
	// DefaultStatusPerUser …). In memory, per replica.
	StatusPerUser, ExchangePerUser, LeavePerUser, CompletePerUser int
	// AutoRoomsPerAddress is how many rooms one client address may create
	// by entering unknown rooms (issuer.Config.DefaultRoom) per
	// AutoRoomWindow; more are answered 429 rate_limited. 0: no limit.
	AutoRoomsPerAddress int
	// AutoRoomWindow is the window of AutoRoomsPerAddress; 0 means
	// DefaultAutoRoomWindow (1 h).
	AutoRoomWindow time.Duration
	// Logger receives request failures (5xx at ERROR, 503 at WARN, with
	// their method and path, copies it may keep; not the queue store's
	// outages and refusals, which are counted; refusals with a cause — a
	// refused admission token — at DEBUG; client-sized values cut to 256
	// bytes), the admin audit lines and readiness changes; nil means
	// slog.Default().
	Logger *slog.Logger
	// AccessLog writes one INFO line ("request") per answered request:
	// method, route template, room, status, duration_ms, request_id
	// (accesslog.go; never a path, query string, token or user id). Admin
	// requests that change something are also written to the audit log
	// ("admin audit") whether this is set or not. flashgate serve sets it
	// from FLASHGATE_ACCESS_LOG (default true).
	AccessLog bool
	// ReturnOrigins are the origins (scheme://host[:port], e.g.
	// "https://shop.example") a shopper may be sent back to from the
	// waiting page (Server.ReturnURL). None: every return URL is refused.
	ReturnOrigins []string
	// PageDir, when set, is a directory whose wait.html (PageTemplate)
	// replaces the built-in template of the waiting page (GET /wait/{room};
	// the template gets a PageView). It is parsed, and tried on a sample
	// view, by Validate and New: a broken template fails startup. Its
	// assets/ subdirectory (optional) holds the page's own files — a logo,
	// a favicon, stylesheets, fonts (.png .jpg .webp .gif .svg .ico .css
	// .woff2, ≤ MaxPageAsset each) — served at /wait/assets/site/{name}.
	PageDir string
	// PageLocaleDir, when set, is a directory of message catalogs of the
	// waiting page ({tag}.json, e.g. de.json or pt-BR.json, in the
	// built-in catalogs' format: docs/browser.md#languages): a file for a
	// built-in language overrides the keys it has, one for another
	// language adds that language (its missing keys in English). Read at
	// startup: a malformed file fails it.
	PageLocaleDir string
	// PageLanguage is the page's language when the room names none and
	// nothing in Accept-Language matches (a BCP 47 tag of a loaded
	// catalog); "" is DefaultPageLanguage (en).
	PageLanguage string
	// CORSOrigins are the origins (scheme://host[:port]) whose pages may
	// call the /v1 API from a browser with credentials (CORS; never
	// /admin). None: no CORS headers, and preflights answer 405.
	CORSOrigins []string
	// Journal, when set, answers the admin journal routes (GET
	// /admin/rooms/{room}/journal?user=U and …/journal/report, journal.go);
	// nil: they answer 404 journal_off.
	Journal Journal
	// RedisHealth, when set, is exported as flashgate_redis_up,
	// flashgate_redis_failures_total and flashgate_redis_rejected_total
	// (flashgate serve passes the breaker of its Redis client).
	RedisHealth RedisHealth
	// RedisPool, when set, is read at each scrape and exported as
	// flashgate_redis_pool_connections{state="total|idle"},
	// flashgate_redis_pool_misses_total (connections dialed because none was
	// idle), flashgate_redis_pool_waits_total and
	// flashgate_redis_pool_wait_seconds_total (requests that waited for a
	// connection, and how long in all) and flashgate_redis_pool_timeouts_total
	// (waits that gave up: raise pool_size). flashgate serve passes its
	// client's PoolStats.
	RedisPool func() *redis.PoolStats
	// Registerer receives the server's metrics. Nil: a private registry,
	// with Go and process collectors, served on /metrics.
	Registerer prometheus.Registerer
	// Gatherer is what /metrics serves. Nil: the private registry, or
	// Registerer when it is also a Gatherer, else prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
}

// RedisHealth is what a circuit breaker in front of the Redis client knows
// (internal/redisconn's Breaker implements it).
type RedisHealth interface {
	// Up is false while the breaker is open: Redis is known down and
	// commands fail fast.
	Up() bool
	// Failures counts connection-level failures (refused, reset, EOF, timeout).
	Failures() uint64
	// Rejected counts commands failed fast, unsent, while the breaker was open.
	Rejected() uint64
}

// Server is the flashgate HTTP layer (fiber v2) over an Issuer. It
// keeps nothing of a request past its handler but copies (package doc,
// "Request values"); event streams hold copies of their room, user and token.
type Server struct {
	is       Issuer
	keys     KeyRing
	verify   *verifier.Verifier
	app      *fiber.App
	log      *slog.Logger
	userHdr  string
	adminSum [32]byte
	admin    bool
	m        *metrics
	// accessLogOn is Options.AccessLog.
	accessLogOn bool
	// visitors is set in visitor mode (Options.Identity).
	visitors *visitors
	// pow is set when Options.EnterPoW is on (visitor mode).
	pow *pow
	// now is the clock of the admission cookie's Max-Age (tests replace it).
	now     func() time.Time
	returns *ReturnPolicy
	// pageTmpl is the waiting page's template (Options.PageDir or built in).
	pageTmpl *template.Template
	// roomPages are Options.PageDir's other templates, by name
	// (issuer.RoomConfig.PageTemplate).
	roomPages map[string]*template.Template
	// langs are the page's message catalogs (Options.PageLocaleDir over
	// the built-in ones).
	langs *catalogs
	// assets are the page's own assets (Options.PageDir/assets).
	assets pageAssets
	cors   *cors // nil: CORS off
	// addrs derives and keys client addresses (clientaddr.go).
	addrs *addrPolicy
	// autoRooms counts the rooms each client address created (nil: no
	// limit); adminFails the failed admin authentications of each.
	autoRooms, adminFails *windowCounter
	// completes is complete's limit (nil: none).
	completes *completeLimit
	// journal is Options.Journal (nil: the journal routes answer journal_off).
	journal Journal
	// streams limits open event streams (Options.StreamsPerUser, StreamsPerAddress).
	streams *streamLimits
	// metricsRoute: /metrics is served on the app (not Options.NoMetricsRoute).
	metricsRoute bool
	// directives caches the edge directive document (directives.go).
	directives directiveCache
	// beacons caches the room beacons (roombeacon.go).
	beacons beaconCache

	// notReady is the reason of the last /readyz answer ("" = ready), to log
	// changes only.
	readyMu  sync.Mutex
	notReady string

	stopOnce sync.Once
	stopping chan struct{}
	// redisTimeout is Options.RedisTimeout; budgets the contexts that
	// carry it (noStoreBudget).
	redisTimeout time.Duration
	budgets      budgets
	// sseInterval, when non-zero, replaces the entries' poll_after between
	// SSE events (tests).
	sseInterval time.Duration
	sseMax      time.Duration
	// sseHeartbeat, when non-zero, replaces SSEHeartbeat (tests).
	sseHeartbeat time.Duration
	// sseNoWatch turns watch off (tests of the heartbeat alone).
	sseNoWatch bool
	// news is the replica's room news fan-out (roomnews.go): it runs the
	// open event streams.
	news *newsHub
	// afterRequest, when set, runs after each request has been answered,
	// before fiber and fasthttp reuse its buffers (tests: zerocopy_test.go
	// overwrites them, so that anything kept past the request shows).
	afterRequest func(*fiber.Ctx)
}

// Validate reports the first setting of o out of its bounds: negative
// enter limits or window, a ProxyHeader without TrustedProxies, a trusted
// proxy that is not an IP address or CIDR range, an Identity other than
// "header" or "visitor", a VisitorKey under 32 bytes in visitor mode, a
// CookieDomain with characters no domain has, an EnterPoW outside 0 …
// MaxEnterPoW or without visitor mode. Zero values pass (defaults:
// UserHeader, BodyLimit, HeaderTimeout, RedisTimeout, EnterWindow; a zero
// or negative BodyLimit or HeaderTimeout also means its default, and a
// negative RedisTimeout means no bound), a ReturnOrigins or CORSOrigins
// entry that is not an http(s) origin (scheme://host[:port], no path). The
// Issuer and Keys that New requires are not checked here, so a process can
// check its settings before it builds them.
func (o Options) Validate() error {
	if _, err := newAddrPolicy(o.ProxyHeader, o.TrustedProxies, o.AddressPrefixV4, o.AddressPrefixV6); err != nil {
		return err
	}
	if min(o.EnterPerUser, o.EnterPerAddress, o.StatusPerUser, o.ExchangePerUser, o.LeavePerUser,
		o.CompletePerUser, o.AutoRoomsPerAddress) < 0 {
		return errors.New("server: Options.EnterPerUser, EnterPerAddress, StatusPerUser, ExchangePerUser, " +
			"LeavePerUser, CompletePerUser and AutoRoomsPerAddress must be >= 0 (0 disables)")
	}
	if o.StreamsPerUser < 0 || o.StreamsPerAddress < 0 || o.MaxStreams < 0 || o.MaxConnsPerIP < 0 || o.Concurrency < 0 {
		return errors.New("server: Options.StreamsPerUser, StreamsPerAddress, MaxStreams, MaxConnsPerIP and Concurrency must be >= 0 (0: no limit or the default)")
	}
	if o.EnterWindow < 0 || o.AutoRoomWindow < 0 {
		return errors.New("server: Options.EnterWindow and AutoRoomWindow must be >= 0")
	}
	if _, err := originSet("ReturnOrigins", o.ReturnOrigins); err != nil {
		return err
	}
	if _, err := originSet("CORSOrigins", o.CORSOrigins); err != nil {
		return err
	}
	if _, err := loadPage(o.PageDir); err != nil {
		return err
	}
	if _, err := loadRoomPages(o.PageDir); err != nil {
		return err
	}
	if _, err := loadCatalogs(o.PageLocaleDir, o.PageLanguage); err != nil {
		return err
	}
	if _, err := loadPageAssets(o.PageDir); err != nil {
		return err
	}
	if err := o.validatePoW(); err != nil {
		return err
	}
	if err := validBeaconMode(o.Beacon); err != nil {
		return err
	}
	return o.validateIdentity()
}

// New returns a Server with every route registered.
func New(opts Options) (*Server, error) {
	if nilIssuer(opts.Issuer) {
		return nil, errors.New("server: Options.Issuer is required")
	}
	if opts.Keys == nil {
		return nil, errors.New("server: Options.Keys is required")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.UserHeader == "" {
		opts.UserHeader = DefaultUserHeader
	}
	if opts.BodyLimit <= 0 {
		opts.BodyLimit = DefaultBodyLimit
	}
	if opts.HeaderTimeout <= 0 {
		opts.HeaderTimeout = DefaultHeaderTimeout
	}
	if opts.RedisTimeout == 0 {
		opts.RedisTimeout = DefaultRedisTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	addrs, err := newAddrPolicy(opts.ProxyHeader, opts.TrustedProxies, opts.AddressPrefixV4, opts.AddressPrefixV6)
	if err != nil {
		return nil, err
	}
	// /v1/complete checks the iss and aud the issuer mints.
	iss, aud := opts.Issuer.TokenClaims()
	v, err := verifier.New(opts.Keys, verifier.Config{Issuer: iss, Audience: aud})
	if err != nil {
		return nil, err
	}
	s := &Server{is: opts.Issuer, keys: opts.Keys, verify: v, log: opts.Logger,
		userHdr: opts.UserHeader, stopping: make(chan struct{}), sseMax: MaxStream, redisTimeout: opts.RedisTimeout, now: time.Now,
		accessLogOn: opts.AccessLog, journal: opts.Journal, addrs: addrs,
		streams: newStreamLimits(opts.StreamsPerUser, opts.StreamsPerAddress, opts.MaxStreams), metricsRoute: !opts.NoMetricsRoute,
		adminFails: newWindowCounter(AdminFailuresPerAddress, AdminFailureWindow),
		completes:  newCompleteLimit(opts.CompletePerUser, opts.EnterWindow)}
	s.beacons.mode = opts.Beacon
	s.news = newNewsHub(opts.Issuer, s, RoomNewsInterval, s.stopping)
	if opts.AutoRoomsPerAddress > 0 {
		window := opts.AutoRoomWindow
		if window == 0 {
			window = DefaultAutoRoomWindow
		}
		s.autoRooms = newWindowCounter(opts.AutoRoomsPerAddress, window)
	}
	s.directives.maxAge = max(int64(opts.DirectiveMaxAge/time.Second), 1)
	if opts.DirectiveMaxAge == 0 {
		s.directives.maxAge = int64(DefaultDirectiveMaxAge / time.Second)
	}
	if opts.Identity == IdentityVisitor {
		s.visitors = &visitors{key: bytes.Clone(opts.VisitorKey), secure: !opts.InsecureCookies, domain: opts.CookieDomain,
			name: visitorCookieName(!opts.InsecureCookies, opts.CookieDomain)}
		s.pow = newPoW(opts.VisitorKey, opts.EnterPoW)
	}
	if opts.AdminToken != "" {
		s.admin, s.adminSum = true, sha256.Sum256([]byte(opts.AdminToken))
	}
	extra := []prometheus.Collector{streamLimitGauge(opts.MaxStreams)}
	if kr, ok := opts.Keys.(interface{ Keys() []keys.KeyInfo }); ok {
		extra = append(extra, newKeyCollector(kr))
	}
	if s.m, err = newMetrics(opts.Registerer, opts.Gatherer, s.is, opts.RedisHealth, opts.RedisPool, extra...); err != nil {
		return nil, err
	}
	s.is.ObserveTicks(s.m.ticks.observe)
	if s.pageTmpl, err = loadPage(opts.PageDir); err != nil {
		return nil, err
	}
	if s.roomPages, err = loadRoomPages(opts.PageDir); err != nil {
		return nil, err
	}
	if s.langs, err = loadCatalogs(opts.PageLocaleDir, opts.PageLanguage); err != nil {
		return nil, err
	}
	if s.assets, err = loadPageAssets(opts.PageDir); err != nil {
		return nil, err
	}
	if s.returns, err = NewReturnPolicy(opts.ReturnOrigins); err != nil {
		return nil, err
	}
	if len(opts.CORSOrigins) > 0 {
		set, err := originSet("CORSOrigins", opts.CORSOrigins)
		if err != nil {
			return nil, err
		}
		s.cors = newCORS(set, opts.UserHeader)
	}
	enterLimits, err := s.enterLimits(opts)
	if err != nil {
		return nil, err
	}
	s.app = fiber.New(fiber.Config{
		AppName:               "flashgate",
		BodyLimit:             opts.BodyLimit,
		ErrorHandler:          s.errorHandler,
		DisableStartupMessage: true,
		UnescapePath:          true,
		// fasthttp's ReadTimeout runs from the request's start; once the
		// headers are in, HeaderReceived (below) gives the body its own.
		ReadTimeout: opts.HeaderTimeout,
		IdleTimeout: 75 * time.Second,
		// No ProxyHeader here: fiber's c.IP() takes a list's leftmost
		// entry, which the client writes. The client address is
		// clientAddr's (clientaddr.go); c.IP() is the peer's.
		Concurrency: opts.Concurrency,
	})
	s.app.Server().MaxConnsPerIP = opts.MaxConnsPerIP
	// An event stream's connection is handed over after its first event and
	// closed by the stream (sse.go): fasthttp's goroutine and buffers are
	// freed meanwhile.
	s.app.Server().KeepHijackedConns = true
	s.app.Server().HeaderReceived = func(*fasthttp.RequestHeader) fasthttp.RequestConfig {
		return fasthttp.RequestConfig{ReadTimeout: BodyTimeout}
	}
	s.routes(enterLimits, s.userLimits(opts))
	return s, nil
}

// RedisHook returns the go-redis hook that times the issuer's script calls
// (flashgate_redis_script_duration_seconds and
// flashgate_redis_script_errors_total, by script): add it to the Redis
// client the Issuer uses (client.AddHook), after any circuit breaker's, so
// that commands failed fast are not timed.
func (s *Server) RedisHook() redis.Hook { return s.m.scripts }

// MetricsHandler serves what /metrics serves (Options.Gatherer), for a
// listener of its own (Options.NoMetricsRoute).
func (s *Server) MetricsHandler() http.Handler { return s.m.http }

// App returns the fiber app, for tests (app.Test) and custom listeners.
func (s *Server) App() *fiber.App { return s.app }

// Listen serves on ln until Shutdown.
func (s *Server) Listen(ln net.Listener) error { return s.app.Listener(ln) }

// Shutdown stops accepting connections, ends open event streams and waits
// for in-flight requests to finish, then for the notes of the admission
// tokens they minted (issuer.WaitMinted), or for ctx to end.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stopping) })
	s.endStreams()
	err := s.app.ShutdownWithContext(ctx)
	if werr := s.is.WaitMinted(ctx); err == nil {
		err = werr
	}
	return err
}

// routes registers every route; enterLimits (the rate limiters) run on
// enter and the waiting page, userLimits (by route: status, exchange,
// leave, complete) on theirs; status's on events too (one budget).
func (s *Server) routes(enterLimits []fiber.Handler, userLimits map[string]fiber.Handler) {
	a := s.app
	a.Use(recover.New())
	a.Use(s.observe)

	// Per-route middleware (not Use) so that c.Route() names the endpoint
	// even when a middleware refuses the request (metrics labels).
	a.Get("/healthz", s.healthz)
	a.Get("/readyz", s.readyz)
	a.Get("/readyz/replica", s.readyzReplica)
	if s.metricsRoute {
		a.Get("/metrics", s.m.handler)
	}
	a.Get("/.well-known/jwks.json", s.jwks)
	a.Get("/openapi.json", s.openapi)
	// The page and its assets are compressed (gzip or Brotli, as the
	// browser accepts; Vary: Accept-Encoding): a phone on a slow network
	// gets the page in a fraction of the bytes (docs/performance.md).
	zip := compress.New(compress.Config{Level: compress.LevelDefault})
	a.Get("/flashgate-client.js", zip, s.clientJS)
	a.Get("/wait/assets/wait.js", zip, s.pageScript)
	a.Get("/wait/assets/wait.css", zip, s.pageStyle)
	a.Get("/wait/assets/site/:name", zip, s.pageAsset)

	// api: no-store, and a bounded wait for the queue store (Options.RedisTimeout).
	api := s.noStoreBudget
	// The edge directives read Redis: the request's budget, and no-store on
	// an error (the document itself sets its max-age).
	a.Get("/.well-known/flashgate-directives.json", api, s.directivesDoc)
	// v1: the public API's chain, CORS headers first (Options.CORSOrigins).
	v1 := []fiber.Handler{api}
	if s.cors != nil {
		v1 = []fiber.Handler{s.cors.handle, api}
		a.Options("/v1/*", s.cors.preflight)
	}
	with := func(hs ...fiber.Handler) []fiber.Handler { return append(slices.Clone(v1), hs...) }
	// limited is route's per-user limiter, if any, then hs.
	limited := func(route string, hs ...fiber.Handler) []fiber.Handler {
		if l := userLimits[route]; l != nil {
			hs = append([]fiber.Handler{l}, hs...)
		}
		return with(hs...)
	}
	// enters: the enter limits, then the auto-room budget (Options.AutoRoomsPerAddress).
	enters := append(slices.Clone(enterLimits), s.autoRoomGuard)
	a.Post("/v1/rooms/:room/enter", with(append(slices.Clone(enters), requireJSON, s.enter)...)...)
	a.Get("/v1/rooms/:room", with(s.roomView)...)
	a.Get("/v1/rooms/:room/beacon", with(s.roomBeacon)...)
	// A challenge counts against the enter limits (not the auto-room
	// budget: it names no room): a place then costs two counts whichever
	// way the challenge is fetched (here, or the 428 of an enter without a
	// solution), the cost docs/security.md#abuse-limits states.
	a.Get("/v1/challenge", with(append(slices.Clone(enterLimits), s.powChallenge)...)...)
	a.Get("/v1/rooms/:room/status", limited("status", s.status)...)
	// Every stream open counts against the status limit (the same
	// limiter): an open runs the status a poll runs.
	a.Get("/v1/rooms/:room/events", limited("status", s.events)...)
	a.Post("/v1/rooms/:room/leave", limited("leave", requireJSON, noMembers, s.leave)...)
	a.Post("/v1/rooms/:room/exchange", limited("exchange", requireJSON, noMembers, s.exchange)...)
	a.Post("/v1/complete", with(requireJSON, s.complete)...) // its limit: completeLimit, in the handler

	// The waiting page: errors render as the page (pageGuard), and entering
	// through it counts against the enter limits.
	a.Get("/wait/:room", append([]fiber.Handler{api, zip, s.pageGuard}, append(slices.Clone(enters), s.page)...)...)
	a.Post("/wait/:room", append([]fiber.Handler{api, zip, s.pageGuard}, append(slices.Clone(enters), s.pageInvite)...)...)
	a.Post("/wait/:room/continue", api, zip, s.pageGuard, s.pageContinue)
	// The shared estimate page (pageestimate.go): no user, no enter limits.
	a.Get("/wait/:room/estimate", api, zip, s.pageGuard, s.pageEstimate)
	a.Get("/wait/:room/brand.css", api, zip, s.brandStyle)
	a.Get("/wait", api, s.pageGuard, s.pageByQuery)

	if s.admin {
		auth := s.adminAuth
		a.Get("/admin/rooms", api, auth, s.adminRooms)
		a.Get("/admin/rooms/:room", api, auth, s.adminRoom)
		a.Put("/admin/rooms/:room", api, auth, s.newsPoke, requireJSON, s.adminPutRoom)
		a.Post("/admin/rooms/:room/open", api, auth, s.newsPoke, requireJSON, noMembers, s.adminState(issuer.RoomOpen))
		a.Post("/admin/rooms/:room/pause", api, auth, s.newsPoke, requireJSON, noMembers, s.adminState(issuer.RoomPaused))
		a.Post("/admin/rooms/:room/close", api, auth, s.newsPoke, requireJSON, s.adminClose)
		a.Post("/admin/rooms/:room/sold-out", api, auth, s.newsPoke, requireJSON, noMembers, s.adminSoldOut)
		a.Delete("/admin/rooms/:room", api, auth, s.newsPoke, s.adminDeleteRoom)
		a.Post("/admin/rooms/:room/revoke", api, auth, requireJSON, s.adminRevoke)
		a.Post("/admin/rooms/:room/stop", api, auth, s.newsPoke, requireJSON, noMembers, s.adminStop)
		a.Post("/admin/rooms/:room/ban", api, auth, requireJSON, s.adminBan)
		a.Delete("/admin/rooms/:room/ban/:user", api, auth, s.adminUnban)
		a.Get("/admin/rooms/:room/bans", api, auth, s.adminBans)
		a.Get("/admin/rooms/:room/stats", api, auth, s.adminStats)
		a.Get("/admin/rooms/:room/preview", api, auth, zip, s.adminPreview)
		a.Post("/admin/rooms/:room/invites", api, auth, requireJSON, s.adminInvites)
		a.Get("/admin/rooms/:room/journal", auth, s.journalBudget, s.adminJournal)
		a.Get("/admin/rooms/:room/journal/report", auth, s.journalBudget, s.adminJournalReport)
	}
}

// observe counts and times every request by route template, writes its
// access log line (Options.AccessLog) and, for admin changes, its audit log
// line (accesslog.go), and renders errors through the ErrorHandler so the
// recorded status is the final one. The duration runs from requestStart to
// one clock read once the answer is rendered: the only clock read of the
// request in server/ (noStoreBudget's deadline derives from requestStart too).
func (s *Server) observe(c *fiber.Ctx) error {
	start := requestStart(c)
	err := c.Next()
	route := c.Route().Path
	if err != nil {
		var fe *fiber.Error
		if errors.As(err, &fe) && (fe.Code == fiber.StatusNotFound || fe.Code == fiber.StatusMethodNotAllowed) {
			route = "unmatched" // the raw path would explode the label set
		}
		if herr := s.errorHandler(c, err); herr != nil {
			_ = c.SendStatus(fiber.StatusInternalServerError)
		}
	}
	end := time.Now()
	d, status, method := end.Sub(start), c.Response().StatusCode(), methodLabel(c.Method())
	s.m.observe(route, method, status, d)
	if s.accessLogOn {
		s.accessLog(c, end, method, route, status, d)
	}
	if s.admin && audited(method, route) {
		s.audit(c, method, route, status)
	}
	if s.afterRequest != nil {
		s.afterRequest(c)
	}
	return nil
}

// requireJSON refuses a request body of any media type but application/json,
// a compressed one, and one that is not a single JSON object (the handlers
// then decode its members strictly).
func requireJSON(c *fiber.Ctx) error {
	// fiber's c.Body() would inflate a gzip/deflate/br body without any
	// limit: a 16 KiB body may expand to gigabytes.
	coded := false
	c.Request().Header.VisitAll(func(k, v []byte) {
		if strings.EqualFold(string(k), fiber.HeaderContentEncoding) &&
			!strings.EqualFold(strings.TrimSpace(string(v)), "identity") {
			coded = true
		}
	})
	if coded {
		c.Set(fiber.HeaderAcceptEncoding, "identity")
		return problemFor(problem.UnsupportedMedia, "compressed request bodies are not accepted (Content-Encoding)")
	}
	body := c.Request().Body()
	if len(body) == 0 {
		return c.Next()
	}
	mt, _, err := mime.ParseMediaType(c.Get(fiber.HeaderContentType))
	if err != nil || mt != fiber.MIMEApplicationJSON {
		if mt == fiber.MIMEApplicationForm {
			// What curl -d sends unless told otherwise: say how to tell it.
			return problemFor(problem.UnsupportedMedia, "request bodies must be application/json, not "+
				"application/x-www-form-urlencoded (curl -d sends that: add -H 'Content-Type: application/json')")
		}
		return problemFor(problem.UnsupportedMedia, "request bodies must be application/json")
	}
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' || !json.Valid(body) {
		return problemFor(problem.MalformedJSON, "the body is not one JSON object")
	}
	return c.Next()
}

// noMembers guards the routes that take no request body: a body, if any,
// must be the empty JSON object, so an unknown member is refused (400
// invalid_input) instead of silently ignored.
func noMembers(c *fiber.Ctx) error {
	body := c.Request().Body()
	if len(body) == 0 {
		return c.Next()
	}
	var m map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(body))
	if d.Decode(&m) != nil || m == nil || d.Decode(&struct{}{}) != io.EOF {
		return problemFor(problem.MalformedJSON, "the body, if any, must be one JSON object")
	}
	if len(m) > 0 {
		names := slices.Sorted(maps.Keys(m))
		return problemFor(string(flashgate.CodeInvalidInput), fmt.Sprintf("unknown field %q: this request takes no body members", names[0]))
	}
	return c.Next()
}

// requestStart is when fasthttp handed the request to fiber
// (fasthttp.RequestCtx.Time: one clock read per request, which fasthttp
// makes anyway just before calling the handler), or now when it is unset.
func requestStart(c *fiber.Ctx) time.Time {
	if t := c.Context().Time(); !t.IsZero() {
		return t
	}
	return time.Now()
}

// noStoreBudget marks the answer Cache-Control: no-store and gives the
// handler's issuer calls a context with the Options.RedisTimeout deadline,
// counted from requestStart (an SSE stream's later polls have their own,
// sse.go): one shared with the requests of the same millisecond (budgets)
// when the request's context is fiber's default, else one of its own.
func (s *Server) noStoreBudget(c *fiber.Ctx) error {
	c.Response().Header.SetCanonical(hdrCacheControl, valNoStore)
	if s.redisTimeout <= 0 {
		return c.Next()
	}
	deadline := requestStart(c).Add(s.redisTimeout)
	if parent := c.UserContext(); parent != context.Background() {
		ctx, cancel := context.WithDeadline(parent, deadline)
		defer cancel()
		c.SetUserContext(ctx)
		return c.Next()
	}
	c.SetUserContext(s.budgets.until(deadline))
	return c.Next()
}

// adminAuth checks the admin bearer token in constant time (over SHA-256
// digests, so the length does not leak either), after the client address's
// failed attempts (AdminFailuresPerAddress per AdminFailureWindow).
func (s *Server) adminAuth(c *fiber.Ctx) error {
	key, err := s.adminThrottled(c)
	if err != nil {
		return err
	}
	tok, ok := problem.Bearer(c.Get(fiber.HeaderAuthorization))
	sum := sha256.Sum256([]byte(tok))
	if subtle.ConstantTimeCompare(sum[:], s.adminSum[:]) != 1 || !ok {
		s.adminFails.add(key)
		return problemFor(problem.AdminUnauthorized, "send the admin token as a Bearer token")
	}
	return c.Next()
}

func (s *Server) healthz(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(fiber.Map{"status": "ok"})
}

// readyz answers 200 when Redis answers and takes writes, and the key ring
// has a public key; otherwise 503 not_ready with the reason. Changes of the
// answer are logged, not every probe.
func (s *Server) readyz(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
	defer cancel()
	reason, err := "", s.is.Ping(ctx)
	switch {
	case errors.Is(err, flashgate.ErrStoreFull):
		reason = "the queue store is full (Redis maxmemory): new entries are refused; status, completions and leaves still work"
	case err != nil:
		reason = "the queue store does not answer"
	default:
		if err = s.keysLoaded(); err != nil {
			reason = "no signing keys loaded"
		}
	}
	s.readyChanged(reason, err)
	if reason != "" {
		return problemFor(problem.NotReady, reason)
	}
	return c.JSON(fiber.Map{"status": "ready"})
}

// readyzReplica answers 200 while this replica can serve buyers: its key
// ring has a public key and it is not shutting down (Shutdown has not
// begun); otherwise 503 not_ready with the reason. Redis is not consulted:
// it is shared, so a Redis failover would take every replica out of the
// load balancer at once, the waiting page and the JWKS with them, while
// each replica can still answer 503 unavailable with Retry-After (the
// breaker) and recovers by itself. /readyz keeps the deep check.
func (s *Server) readyzReplica(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	select {
	case <-s.stopping:
		return problemFor(problem.NotReady, "shutting down")
	default:
	}
	if s.keysLoaded() != nil {
		return problemFor(problem.NotReady, "no signing keys loaded")
	}
	return c.JSON(fiber.Map{"status": "ready"})
}

// readyChanged logs a /readyz answer that differs from the previous one.
func (s *Server) readyChanged(reason string, err error) {
	s.readyMu.Lock()
	prev := s.notReady
	s.notReady = reason
	s.readyMu.Unlock()
	switch {
	case reason == prev:
	case reason == "":
		s.log.Info("ready again", "was", prev)
	default:
		s.log.Warn("not ready", "reason", reason, "err", err)
	}
}

func (s *Server) keysLoaded() error {
	doc, err := s.keys.PublicJWKS()
	if err != nil {
		return err
	}
	set, err := verifier.ParseJWKS(doc)
	if err != nil {
		return err
	}
	if len(set.KeyIDs()) == 0 {
		return errors.New("the JWKS has no keys")
	}
	return nil
}

func (s *Server) jwks(c *fiber.Ctx) error {
	doc, err := s.keys.PublicJWKS()
	if err != nil {
		return err // internal: logged, not leaked
	}
	c.Set(fiber.HeaderCacheControl, "public, max-age=60")
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(doc)
}
