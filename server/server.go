package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"log/slog"
	"mime"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashgate/flashgate/issuer"
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
	DefaultTokenIssuer = "flashgate"
	DefaultAudience    = "orders"
	DefaultUserHeader  = "X-User-ID"
	DefaultBodyLimit   = 16 << 10
	// MaxStream is the longest a server-sent events stream stays open; the
	// client's EventSource reconnects after it.
	MaxStream = 5 * time.Minute
)

// Options configures a Server.
type Options struct {
	// Issuer is the domain core the handlers wrap. Required.
	Issuer *issuer.Issuer
	// Keys signs and verifies admission tokens and publishes the JWKS. Required.
	Keys KeyRing
	// TokenIssuer and Audience are the iss and aud the admission tokens carry
	// (checked on /v1/complete). Defaults "flashgate" and "orders"; they must
	// match the issuer.Config.
	TokenIssuer, Audience string
	// AdminToken is the bearer token of the admin API (/admin/...). Empty
	// disables the admin API: its routes answer 404 unknown-route.
	AdminToken string
	// UserHeader is the trusted request header carrying the user id. The
	// platform's gateway authenticates the user and sets it; it must strip
	// the header from client requests. Default "X-User-ID".
	UserHeader string
	// BodyLimit is the largest request body in bytes (default 16 KiB).
	BodyLimit int
	// Logger receives request failures (5xx); nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the server's metrics. Nil: a private registry,
	// with Go and process collectors, served on /metrics.
	Registerer prometheus.Registerer
	// Gatherer is what /metrics serves. Nil: the private registry, or
	// Registerer when it is also a Gatherer, else prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
}

// Server is the flashgate HTTP layer (fiber v2) over an issuer.Issuer.
type Server struct {
	is       *issuer.Issuer
	keys     KeyRing
	verify   *verifier.Verifier
	app      *fiber.App
	log      *slog.Logger
	userHdr  string
	adminSum [32]byte
	admin    bool
	m        *metrics

	stopOnce sync.Once
	stopping chan struct{}
	// sseInterval, when non-zero, replaces the entries' poll_after between
	// SSE events (tests).
	sseInterval time.Duration
	sseMax      time.Duration
}

// New returns a Server with every route registered.
func New(opts Options) (*Server, error) {
	if opts.Issuer == nil {
		return nil, errors.New("server: Options.Issuer is required")
	}
	if opts.Keys == nil {
		return nil, errors.New("server: Options.Keys is required")
	}
	if opts.TokenIssuer == "" {
		opts.TokenIssuer = DefaultTokenIssuer
	}
	if opts.Audience == "" {
		opts.Audience = DefaultAudience
	}
	if opts.UserHeader == "" {
		opts.UserHeader = DefaultUserHeader
	}
	if opts.BodyLimit <= 0 {
		opts.BodyLimit = DefaultBodyLimit
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	v, err := verifier.New(opts.Keys, verifier.Config{Issuer: opts.TokenIssuer, Audience: opts.Audience})
	if err != nil {
		return nil, err
	}
	s := &Server{is: opts.Issuer, keys: opts.Keys, verify: v, log: opts.Logger,
		userHdr: opts.UserHeader, stopping: make(chan struct{}), sseMax: MaxStream}
	if opts.AdminToken != "" {
		s.admin, s.adminSum = true, sha256.Sum256([]byte(opts.AdminToken))
	}
	if s.m, err = newMetrics(opts.Registerer, opts.Gatherer, s.is); err != nil {
		return nil, err
	}
	s.app = fiber.New(fiber.Config{
		AppName:               "flashgate",
		BodyLimit:             opts.BodyLimit,
		ErrorHandler:          s.errorHandler,
		DisableStartupMessage: true,
		UnescapePath:          true,
		ReadTimeout:           15 * time.Second,
		IdleTimeout:           75 * time.Second,
	})
	s.routes()
	return s, nil
}

// App returns the fiber app, for tests (app.Test) and custom listeners.
func (s *Server) App() *fiber.App { return s.app }

// Listen serves on ln until Shutdown.
func (s *Server) Listen(ln net.Listener) error { return s.app.Listener(ln) }

// Shutdown stops accepting connections, ends open event streams and waits
// for in-flight requests to finish, or for ctx to end.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stopping) })
	return s.app.ShutdownWithContext(ctx)
}

func (s *Server) routes() {
	a := s.app
	a.Use(recover.New())
	a.Use(s.observe)

	// Per-route middleware (not Use) so that c.Route() names the endpoint
	// even when a middleware refuses the request (metrics labels).
	a.Get("/healthz", s.healthz)
	a.Get("/readyz", s.readyz)
	a.Get("/metrics", s.m.handler)
	a.Get("/.well-known/jwks.json", s.jwks)

	a.Post("/v1/rooms/:room/enter", noStore, requireJSON, s.enter)
	a.Get("/v1/rooms/:room/status", noStore, s.status)
	a.Get("/v1/rooms/:room/events", noStore, s.events)
	a.Post("/v1/rooms/:room/leave", noStore, requireJSON, s.leave)
	a.Post("/v1/rooms/:room/exchange", noStore, requireJSON, s.exchange)
	a.Post("/v1/complete", noStore, requireJSON, s.complete)

	if s.admin {
		auth := s.adminAuth
		a.Get("/admin/rooms", noStore, auth, s.adminRooms)
		a.Get("/admin/rooms/:room", noStore, auth, s.adminRoom)
		a.Put("/admin/rooms/:room", noStore, auth, requireJSON, s.adminPutRoom)
		a.Post("/admin/rooms/:room/open", noStore, auth, requireJSON, s.adminState(issuer.RoomOpen))
		a.Post("/admin/rooms/:room/pause", noStore, auth, requireJSON, s.adminState(issuer.RoomPaused))
		a.Post("/admin/rooms/:room/close", noStore, auth, requireJSON, s.adminState(issuer.RoomClosed))
		a.Post("/admin/rooms/:room/revoke", noStore, auth, requireJSON, s.adminRevoke)
		a.Get("/admin/rooms/:room/stats", noStore, auth, s.adminStats)
	}
}

// observe counts and times every request by route template, and renders
// errors through the ErrorHandler so the recorded status is the final one.
func (s *Server) observe(c *fiber.Ctx) error {
	start := time.Now()
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
	s.m.observe(route, c.Method(), c.Response().StatusCode(), time.Since(start))
	return nil
}

// requireJSON refuses a request body of any media type but application/json.
func requireJSON(c *fiber.Ctx) error {
	if len(c.Request().Body()) == 0 {
		return c.Next()
	}
	mt, _, err := mime.ParseMediaType(c.Get(fiber.HeaderContentType))
	if err != nil || mt != fiber.MIMEApplicationJSON {
		return problem(codeUnsupportedMedia, "request bodies must be application/json")
	}
	return c.Next()
}

func noStore(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Next()
}

// adminAuth checks the admin bearer token in constant time (over SHA-256
// digests, so the length does not leak either).
func (s *Server) adminAuth(c *fiber.Ctx) error {
	tok, ok := bearer(c.Get(fiber.HeaderAuthorization))
	sum := sha256.Sum256([]byte(tok))
	if subtle.ConstantTimeCompare(sum[:], s.adminSum[:]) != 1 || !ok {
		return problem(codeAdminUnauthorized, "send the admin token as a Bearer token")
	}
	return c.Next()
}

// bearer extracts the token of an "Authorization: Bearer <token>" header
// (scheme case-insensitive, RFC 6750 §2.1).
func bearer(h string) (string, bool) {
	const p = "bearer "
	if len(h) <= len(p) || !strings.EqualFold(h[:len(p)], p) {
		return "", false
	}
	t := strings.TrimSpace(h[len(p):])
	return t, t != ""
}

func (s *Server) healthz(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(fiber.Map{"status": "ok"})
}

// readyz answers 200 when Redis answers and the key ring has a public key.
func (s *Server) readyz(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
	defer cancel()
	if err := s.is.Ping(ctx); err != nil {
		p := problem(codeNotReady, "the queue store does not answer")
		p.cause = err
		return p
	}
	if err := s.keysLoaded(); err != nil {
		p := problem(codeNotReady, "no signing keys loaded")
		p.cause = err
		return p
	}
	return c.JSON(fiber.Map{"status": "ready"})
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
