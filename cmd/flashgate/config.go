package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/flashgate/flashgate/internal/logbuf"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/server"
)

// serveEnv is the environment of `flashgate serve`. Every variable, its
// default and its meaning (help tag) is printed by `flashgate serve -h`.
type serveEnv struct {
	RedisURL string      `env:"REDIS_URL" help:"redis:// or rediss:// URL of the queue store (redis+sentinel://…?master_name=M for Sentinel, redis+cluster://…&addr=… for Cluster); unset: embedded in-memory Redis, quick start only"`
	Serve    serveConfig `envPrefix:"FLASHGATE_"`
}

// serveConfig is the FLASHGATE_* part of serveEnv.
type serveConfig struct {
	Addr                   string        `env:"ADDR" envDefault:"127.0.0.1:8080" help:"listen address of the HTTP API"`
	KeysFile               string        `env:"KEYS_FILE" envDefault:"flashgate-keys.json" help:"signing key ring (private JWK Set, mode 0600); created with a warning if missing"`
	Issuer                 string        `env:"ISSUER" envDefault:"flashgate" help:"iss claim of admission tokens, and of the invites the issuer signs and accepts"`
	Audience               string        `env:"AUDIENCE" envDefault:"orders" help:"aud claim of admission tokens"`
	AdminToken             string        `env:"ADMIN_TOKEN" help:"bearer token of the admin API (/admin/...), at least 32 bytes (openssl rand -base64 32); empty disables the admin API; 10 failed attempts a minute from one address are answered 429"`
	UserHeader             string        `env:"USER_HEADER" envDefault:"X-User-ID" help:"trusted header carrying the user id (set by your gateway)"`
	Identity               string        `env:"IDENTITY" envDefault:"header" help:"header | visitor: trust FLASHGATE_USER_HEADER from your gateway, or identify browsers by a signed HttpOnly visitor cookie (the user header is then ignored, and exchange also sets the flashgate_admission cookie)"`
	VisitorKey             string        `env:"VISITOR_KEY" help:"base64 HMAC key of visitor cookies, at least 32 bytes, the same on every replica; unset: derived from the waiting-token secret (HMAC-SHA256 of it and \"flashgate visitor v1\")"`
	CookieDomain           string        `env:"COOKIE_DOMAIN" help:"Domain attribute of the flashgate_admission cookie (visitor mode), e.g. shop.example; unset: host-only"`
	EnterPoW               int           `env:"ENTER_POW" envDefault:"0" help:"visitor mode: difficulty in bits of the proof of work (SHA-256, ALTCHA format) a visitor's first enter must carry (maxnumber = 2^bits: 2^(bits−1) SHA-256 on average), solved by the waiting page and flashgate-client.js; 14 ≈ 1–2 s on a phone-class CPU (docs/security.md#abuse-limits); 0 = off; at most 26"`
	InsecureCookies        bool          `env:"INSECURE_COOKIES" envDefault:"false" help:"drop the Secure attribute of the visitor and admission cookies: plain-http localhost development only"`
	WaitingSecret          string        `env:"WAITING_SECRET" help:"base64 HMAC key for waiting tokens, at least 32 bytes, the same on every replica; unset: created once and shared through Redis"`
	LotteryKey             string        `env:"LOTTERY_KEY" help:"base64 key, at least 32 bytes, the same on every replica and never stored in Redis, that the pre-queue lottery's secrets derive from (docs/rooms.md#pre-queue-lottery); unset: derived from FLASHGATE_WAITING_SECRET when that is set, else a key of each process (replicas then disagree: set it)"`
	BeaconURL              string        `env:"BEACON_URL" help:"base URL of a drand HTTP relay serving the League of Entropy quicknet chain (e.g. https://api.drand.sh): every shuffle room's draw then also uses the first quicknet round at or after opens_at + 10 s, verified against the chain's public key, so nobody — the operator included — knows the order before it; unset: the seed is operator-chosen, and the room view, page and receipts say so"`
	DefaultRoom            string        `env:"DEFAULT_ROOM" envDefault:"off" help:"off | open | paused: create unknown rooms on first enter with the defaults below (auto rooms, limited by FLASHGATE_MAX_AUTO_ROOMS and deleted when idle); anyone may then name rooms (every enter into a new name creates one, FLASHGATE_AUTO_ROOMS_PER_ADDRESS per address); off refuses unknown rooms (404 unknown_room)"`
	DefaultCapacity        int           `env:"DEFAULT_CAPACITY" envDefault:"100" help:"total active users of rooms created by DEFAULT_ROOM"`
	DefaultRate            int           `env:"DEFAULT_RATE_PER_MINUTE" envDefault:"600" help:"new users per minute of rooms created by DEFAULT_ROOM"`
	DefaultSessionDuration time.Duration `env:"DEFAULT_SESSION" envDefault:"5m" help:"session duration (admission lifetime, whole seconds, at most 15m) of rooms created by DEFAULT_ROOM"`
	DefaultTick            time.Duration `env:"DEFAULT_TICK" envDefault:"1s" help:"admission tick of rooms created by DEFAULT_ROOM"`
	DefaultArrivalWindow   offDuration   `env:"DEFAULT_ARRIVAL_WINDOW" envDefault:"1m" help:"arrival window of rooms created by DEFAULT_ROOM: an admission not exchanged within it ends early (EXPIRED, reason not_claimed) and its slot goes to the next in line; off (or 0, as a room's arrival_window_ms 0): the admission lasts the session; else 1s … 15m"`
	DefaultPreQueue        string        `env:"DEFAULT_PREQUEUE" envDefault:"fifo" help:"fifo | shuffle: pre-queue order of rooms created by DEFAULT_ROOM (shuffle: everyone who entered before the room first opened is placed by a lottery drawn at opening, each room with its own secret seed)"`
	MaxAutoRooms           offInt        `env:"MAX_AUTO_ROOMS" envDefault:"100" help:"most rooms DEFAULT_ROOM may have created at once, across replicas (an enter into another unknown room answers 503 room_limit); off: no limit (0 is deprecated: off for one release, with a warning, then refused)"`
	AutoRoomIdle           offDuration   `env:"AUTO_ROOM_IDLE" envDefault:"1h" help:"a room DEFAULT_ROOM created is deleted after this long with nobody waiting or admitted, and its slot freed; at least 1s; off: never (0 is deprecated: off for one release, with a warning, then refused)"`
	RoomRetention          time.Duration `env:"ROOM_RETENTION" envDefault:"24h" help:"how long a room's keys (every one, the user index included) live after the room ends (closed, sold out, its window closed, deleted) before Redis expires them; 1m … 720h; a room's retention_ms overrides it"`
	JournalMaxLen          offInt64      `env:"JOURNAL_MAXLEN" envDefault:"1000000" help:"bound of each room's journal stream (fg:{room}:journal, XADD MAXLEN ~, in entries: one per script call that changes entries, holding up to 256 events, and one per config change; flashgate journal run writes it to PostgreSQL and trims it; past the bound unread entries are lost to the journal); off: the rooms this replica creates or configures write no journal (0 is deprecated: off for one release, with a warning, then refused)"`
	LostRooms              string        `env:"LOST_ROOMS" envDefault:"recreate" help:"recreate | await-restore: what a replica does with a room it knew whose data Redis lost (docs/operations.md#durability): recreate it empty with a new epoch (clients re-enter at the back), or answer 503 room_lost (Retry-After 2) until flashgate restore rebuilds it from the journal (clients keep their place)"`
	EnterPerUser           int           `env:"ENTER_PER_USER" envDefault:"30" help:"enter requests per window per user id (429 beyond; counted in memory per replica); 0 disables"`
	EnterPerAddress        int           `env:"ENTER_PER_ADDRESS" envDefault:"300" help:"enter requests per window per client address (its /64 for IPv6; many users share one behind a NAT); in visitor mode also the most new visitors (places) one address takes per window; 0 disables; applied with FLASHGATE_PROXY_HEADER set, or in visitor mode (then to the TCP peer without it)"`
	EnterWindow            time.Duration `env:"ENTER_WINDOW" envDefault:"10s" help:"fixed window of the enter limits and of the per-user status, exchange, leave and complete limits (whole seconds)"`
	StatusPerUser          int           `env:"STATUS_PER_USER" envDefault:"60" help:"status requests and event stream opens per window per user (429 beyond; in memory per replica; polling at the advised interval is at most 12.5); 0 disables"`
	ExchangePerUser        int           `env:"EXCHANGE_PER_USER" envDefault:"20" help:"exchange requests per window per user (429 beyond; in memory per replica); 0 disables"`
	LeavePerUser           int           `env:"LEAVE_PER_USER" envDefault:"20" help:"leave requests per window per user (429 beyond; in memory per replica); 0 disables"`
	CompletePerUser        int           `env:"COMPLETE_PER_USER" envDefault:"20" help:"/v1/complete requests per window per user (the admission token's sub, counted once the token is verified; refused tokens count against the client address instead; 429 beyond; in memory per replica); 0 disables"`
	AutoRoomsPerAddress    int           `env:"AUTO_ROOMS_PER_ADDRESS" envDefault:"10" help:"rooms one client address may create by entering unknown rooms (FLASHGATE_DEFAULT_ROOM) per FLASHGATE_AUTO_ROOM_WINDOW (429 beyond; in memory per replica); applied where FLASHGATE_ENTER_PER_ADDRESS is; 0: no limit"`
	AutoRoomWindow         time.Duration `env:"AUTO_ROOM_WINDOW" envDefault:"1h" help:"fixed window of FLASHGATE_AUTO_ROOMS_PER_ADDRESS"`
	ProxyHeader            string        `env:"PROXY_HEADER" help:"header in which your gateway/CDN passes the client address: X-Forwarded-For or Forwarded (RFC 7239; read from the right, skipping FLASHGATE_TRUSTED_PROXIES: the right-most other entry is the client), or one the proxy sets itself (X-Real-IP, CF-Connecting-IP); believed only from FLASHGATE_TRUSTED_PROXIES; what the client wrote to the left never hides the proxy's entry; an entry that names no address (or only trusted proxies) is keyed and logged as \"unknown\", never as the proxy"`
	TrustedProxies         []string      `env:"TRUSTED_PROXIES" envSeparator:"," help:"comma-separated IP addresses and CIDR ranges of the proxies whose FLASHGATE_PROXY_HEADER is believed (and skipped in its list); required with it"`
	AddressPrefixV4        int           `env:"ADDRESS_PREFIX_V4" envDefault:"32" help:"prefix length (1 … 32) on which per-address limits key IPv4 client addresses (IPv4-mapped IPv6 ones too)"`
	AddressPrefixV6        int           `env:"ADDRESS_PREFIX_V6" envDefault:"64" help:"prefix length (1 … 128) on which per-address limits key IPv6 client addresses: 64, the network one subscriber gets"`
	ReturnOrigins          []string      `env:"RETURN_ORIGINS" envSeparator:"," help:"comma-separated origins (scheme://host[:port], e.g. https://shop.example) the waiting page may send a shopper back to: the worker's return parameter is accepted only as an absolute http(s) URL on one of them; unset: none"`
	PageDir                string        `env:"PAGE_DIR" help:"directory whose wait.html replaces the built-in waiting page template (GET /wait/{room}) and whose assets/ holds the page's own logo, favicon, stylesheets and fonts (served at /wait/assets/site/{name}); parsed at startup, a broken template or asset fails it; unset: built in"`
	PageLocaleDir          string        `env:"PAGE_LOCALE_DIR" help:"directory of the waiting page's message catalogs ({tag}.json, e.g. de.json): a built-in language's keys overridden, or a language added; read at startup, a malformed file fails it; unset: the built-in catalogs"`
	PageLanguage           string        `env:"PAGE_LANGUAGE" help:"the waiting page's language when the room names none and nothing in Accept-Language matches (a BCP 47 tag of a catalog); unset: en"`
	CORSOrigins            []string      `env:"CORS_ORIGINS" envSeparator:"," help:"comma-separated origins (scheme://host[:port]) whose pages may call /v1 from a browser, with credentials (CORS; never /admin); unset: no CORS"`
	CompletionReplicas     int           `env:"COMPLETION_REPLICAS" envDefault:"0" help:"Sentinel/standalone with replicas: completions and revocations wait (Redis WAIT) for this many replica acknowledgements and fail closed (503) without them; 0 disables; not on Cluster"`
	CompletionTimeout      time.Duration `env:"COMPLETION_TIMEOUT" envDefault:"200ms" help:"how long a completion waits for FLASHGATE_COMPLETION_REPLICAS acknowledgements"`
	StatusSnapshot         time.Duration `env:"STATUS_SNAPSHOT" envDefault:"0s" help:"opt-in for very large lines: largest age of the per-replica room snapshot that answers status for users far behind the head (position_estimated; 500ms suits a line of 100,000s); 0: every status asks Redis (exact positions)"`
	ScriptBatch            int           `env:"SCRIPT_BATCH" envDefault:"32" help:"most items one script call carries (1 … 1000): concurrent enters, statuses and exchanges, and completions for a room share a call of their kind (group commit); 1 turns coalescing off"`
	EnterBatch             *int          `env:"ENTER_BATCH" help:"deprecated (one release): the old name of FLASHGATE_SCRIPT_BATCH, read when that is unset (serve logs a warning)"`
	DirectiveMaxAge        time.Duration `env:"DIRECTIVE_MAX_AGE" envDefault:"5s" help:"Cache-Control max-age of the edge directive document (/.well-known/flashgate-directives.json), whole seconds, 1s … 1h: an operator's stop reaches edge verifiers within it plus one fetch; shorter means a faster stop and more fetches"`
	RedisWait              time.Duration `env:"REDIS_WAIT" envDefault:"0s" help:"how long serve waits at start for Redis to answer, pinging with backoff (250 ms doubling to 10 s), before it gives up and exits 1; 0: until it answers or SIGTERM (in Kubernetes the startup probe decides: a Redis failover no longer crash-loops the pods)"`
	RedisTimeout           time.Duration `env:"REDIS_TIMEOUT" envDefault:"1s" help:"the most one API request waits for Redis before answering 503 unavailable (a hung Redis costs a client at most this long; requests that use it all open the Redis breaker, after which they fail at once)"`
	ShutdownTimeout        time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"15s" help:"how long a graceful shutdown waits for in-flight requests (then for the minted notes of the tokens they minted)"`
	LogLevel               string        `env:"LOG_LEVEL" envDefault:"info" help:"debug | info | warn | error"`
	LogFormat              string        `env:"LOG_FORMAT" envDefault:"text" help:"text | json (go-redis's own lines go through the same handler, at debug)"`
	LogFlush               time.Duration `env:"LOG_FLUSH" envDefault:"100ms" help:"log lines below WARN (the access log) are buffered and written together at most this often (one write instead of one per request; a crash loses at most this much of them); WARN and ERROR lines are written at once; 0: every line at once"`
	JournalDSN             string        `env:"JOURNAL_DSN" help:"PostgreSQL URL of the journal (docs/operations.md#asking-the-journal), e.g. postgres://flashgate@db/flashgate: the admin routes /admin/rooms/{room}/journal and …/journal/report read it; unset: they answer 404 journal_off; PostgreSQL away at start is logged, not fatal (the routes answer 503 until it is back)"`
	AccessLog              bool          `env:"ACCESS_LOG" envDefault:"true" help:"true | false: one INFO log line per request (method, route template, room, status, duration_ms, request_id; never paths, query strings, tokens or user ids); admin changes are audit-logged either way"`
	StreamsPerUser         int           `env:"STREAMS_PER_USER" envDefault:"2" help:"open event streams (/v1/rooms/{room}/events) per user per room on this replica; one more ends the oldest (final event: replaced); 0 disables"`
	StreamsPerAddress      int           `env:"STREAMS_PER_ADDRESS" envDefault:"100" help:"open event streams per client address on this replica; one more is refused 429 (the client polls instead); 0 disables; applied where FLASHGATE_ENTER_PER_ADDRESS is: with FLASHGATE_PROXY_HEADER set, or in visitor mode (then to the TCP peer without it)"`
	MaxStreams             int           `env:"MAX_STREAMS" envDefault:"0" help:"open event streams on this replica in total (each holds about 6 KB: docs/sizing.md m_stream; set it to what the memory limit holds); one more is refused 429 (the waiting page polls status instead) unless it replaces a stream of the same user; flashgate_sse_streams_limit exports it; 0: no limit"`
	Beacon                 string        `env:"BEACON" envDefault:"auto" help:"auto | always | off: when WAITING answers (enter, status) carry Flashgate-Beacon, asking the waiting page to poll the room beacon (GET /v1/rooms/{room}/beacon: one signed public document per room, cacheable by a CDN: docs/browser.md#the-room-beacon) instead of its status: auto while this replica holds FLASHGATE_MAX_STREAMS open streams, always, or never (the beacon is served either way)"`
	MaxConnsPerIP          int           `env:"MAX_CONNS_PER_IP" envDefault:"0" help:"most concurrent connections from one TCP peer address (fasthttp MaxConnsPerIP; more get a plain-text 429 and are closed); the peer, never FLASHGATE_PROXY_HEADER's address: behind a gateway it limits the gateway, so set it only where clients connect directly; 0: no limit"`
	Concurrency            int           `env:"CONCURRENCY" envDefault:"262144" help:"most connections served at once (fasthttp Concurrency; an event stream counts until its first event, FLASHGATE_MAX_STREAMS caps open streams); more get a plain-text 503 and are closed"`
	MetricsAddr            string        `env:"METRICS_ADDR" help:"listen address of /metrics on its own HTTP server, which the API then no longer serves, e.g. 127.0.0.1:9090; a loopback address only (anything else refuses to start) unless FLASHGATE_INSECURE_METRICS is set; unset: /metrics is on the API's public listener (room names and sales figures: block it at your gateway)"`
	InsecureMetrics        bool          `env:"INSECURE_METRICS" envDefault:"false" help:"allow FLASHGATE_METRICS_ADDR on a non-loopback address (e.g. :9090 for a Prometheus on another host; the metrics name every room and its sales: firewall the port)"`
	PprofAddr              string        `env:"PPROF_ADDR" help:"listen address of Go's profiler (net/http/pprof: /debug/pprof/…) on its own HTTP server, never the API's, e.g. 127.0.0.1:6060; a loopback address only (anything else refuses to start) unless FLASHGATE_INSECURE_PPROF is set; unset: off"`
	InsecurePprof          bool          `env:"INSECURE_PPROF" envDefault:"false" help:"allow FLASHGATE_PPROF_ADDR on a non-loopback address (profiles expose memory contents, command line and code: put an authenticating proxy or a firewall in front)"`
}

// loadServeEnv parses the environment (environ: "K=V" pairs; nil means the
// process environment).
func loadServeEnv(environ map[string]string) (serveEnv, error) {
	var c serveEnv
	opts := env.Options{}
	if environ != nil {
		opts.Environment = environ
	}
	if err := env.ParseWithOptions(&c, opts); err != nil {
		return c, envError(err)
	}
	if old := c.Serve.EnterBatch; old != nil {
		lookup := os.LookupEnv
		if environ != nil {
			lookup = func(k string) (string, bool) { v, ok := environ[k]; return v, ok }
		}
		if _, set := lookup("FLASHGATE_SCRIPT_BATCH"); !set {
			c.Serve.ScriptBatch = *old
		} else if c.Serve.ScriptBatch != *old {
			return c, fmt.Errorf("FLASHGATE_SCRIPT_BATCH (%d) and its deprecated alias FLASHGATE_ENTER_BATCH (%d) differ: unset FLASHGATE_ENTER_BATCH", c.Serve.ScriptBatch, *old)
		}
	}
	return c, c.Serve.validate()
}

// deprecations are the warnings serve logs at startup for deprecated
// variables that are set.
func (c *serveConfig) deprecations() []string {
	var out []string
	if c.EnterBatch != nil {
		out = append(out, "FLASHGATE_ENTER_BATCH is deprecated and will be removed: set FLASHGATE_SCRIPT_BATCH")
	}
	for _, s := range c.offSettings(&issuer.Config{}) {
		if s.zero {
			out = append(out, s.name+"=0 means off for one release and will be refused: write "+s.name+"=off")
		}
	}
	return out
}

// envError rewrites caarlos0/env's errors, which name the Go field
// (`parse error on field "DefaultCapacity" of type "int"`), to name the
// variable the operator set: `FLASHGATE_DEFAULT_CAPACITY: not a valid int:
// strconv.ParseInt: parsing "abc": invalid syntax`. Several bad variables
// give one line each, joined by "; ". Errors it does not know pass as they are.
func envError(err error) error { return envErrorOf(reflect.TypeOf(serveEnv{}), err) }

// envErrorOf is envError for the environment struct t (serveEnv, journalEnv).
func envErrorOf(t reflect.Type, err error) error {
	var agg env.AggregateError
	errs := []error{err}
	if errors.As(err, &agg) {
		errs = agg.Errors
	}
	names := envNames(t, "")
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		var pe env.ParseError
		var np env.NoParserError
		switch {
		case errors.As(e, &pe) && names[pe.Name] != "":
			msgs = append(msgs, fmt.Sprintf("%s: not a valid %s: %v", names[pe.Name], typeWord(pe.Type), pe.Err))
		case errors.As(e, &np) && names[np.Name] != "":
			msgs = append(msgs, fmt.Sprintf("%s: no parser for %s", names[np.Name], np.Type))
		default:
			msgs = append(msgs, e.Error())
		}
	}
	return errors.New(strings.Join(msgs, "; "))
}

// typeWord names a field's type as the operator writes its value.
func typeWord(t reflect.Type) string {
	switch {
	case t == reflect.TypeOf(time.Duration(0)):
		return "duration (e.g. 1m30s)"
	case t == reflect.TypeOf(offOr[time.Duration]{}):
		return "duration (e.g. 1m30s) or off"
	case t == reflect.TypeOf(offOr[int]{}), t == reflect.TypeOf(offOr[int64]{}):
		return "integer or off"
	case t.Kind() == reflect.Bool:
		return "boolean (true or false)"
	case t.Kind() == reflect.Slice:
		return "comma-separated list of " + typeWord(t.Elem())
	}
	return t.String()
}

// envNames maps each Go field name of t (a struct, following envPrefix) to
// its variable; the field names of serveEnv are unique
// (TestEnvErrorsNameTheVariable).
func envNames(t reflect.Type, prefix string) map[string]string {
	m := map[string]string{}
	for _, v := range envDoc(t, prefix) {
		m[v.field] = v.name
	}
	return m
}

func (c *serveConfig) validate() error {
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	if c.LogFlush < 0 {
		return fmt.Errorf("FLASHGATE_LOG_FLUSH must be >= 0, got %s", c.LogFlush)
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return fmt.Errorf("FLASHGATE_LOG_FORMAT must be text or json, got %q", c.LogFormat)
	}
	switch c.DefaultRoom {
	case "off", "open", "paused":
	default:
		return fmt.Errorf("FLASHGATE_DEFAULT_ROOM must be off, open or paused, got %q", c.DefaultRoom)
	}
	if c.DefaultRoom != "off" {
		if err := c.defaultRoom().Validate(); err != nil {
			return fmt.Errorf("FLASHGATE_DEFAULT_*: %w", err)
		}
	}
	// The variable's default is in its tag (TestServeEnvDefaultsArePackageDefaults):
	// an explicit 0 is a slip, not "the default" it would mean to the issuer.
	if c.ScriptBatch == 0 {
		return fmt.Errorf("FLASHGATE_SCRIPT_BATCH must be 1 … %d (unset: %d), got 0", issuer.MaxScriptBatch, issuer.DefaultScriptBatch)
	}
	for _, s := range c.offSettings(&issuer.Config{}) {
		if s.negative {
			return fmt.Errorf("%s must be off or positive, got %s", s.name, s.value)
		}
	}
	if c.LostRooms != string(issuer.LostRoomsRecreate) && c.LostRooms != string(issuer.LostRoomsAwaitRestore) {
		return fmt.Errorf("FLASHGATE_LOST_ROOMS must be %s or %s, got %q", issuer.LostRoomsRecreate, issuer.LostRoomsAwaitRestore, c.LostRooms)
	}
	if c.RoomRetention < issuer.MinRetention || c.RoomRetention > issuer.MaxRetention {
		return fmt.Errorf("FLASHGATE_ROOM_RETENTION must be %s … %s, got %s", issuer.MinRetention, issuer.MaxRetention, c.RoomRetention)
	}
	if err := c.issuerConfig().Validate(); err != nil {
		return fmt.Errorf("FLASHGATE_SCRIPT_BATCH, FLASHGATE_COMPLETION_*, FLASHGATE_AUTO_ROOM_IDLE, FLASHGATE_ROOM_RETENTION: %w", err)
	}
	if c.DirectiveMaxAge < time.Second || c.DirectiveMaxAge > time.Hour || c.DirectiveMaxAge%time.Second != 0 {
		return fmt.Errorf("FLASHGATE_DIRECTIVE_MAX_AGE must be whole seconds in 1s … 1h, got %s", c.DirectiveMaxAge)
	}
	if c.RedisWait < 0 {
		return fmt.Errorf("FLASHGATE_REDIS_WAIT must be >= 0 (0: wait until Redis answers), got %s", c.RedisWait)
	}
	if c.RedisTimeout <= 0 {
		return fmt.Errorf("FLASHGATE_REDIS_TIMEOUT must be positive, got %s", c.RedisTimeout)
	}
	if c.ShutdownTimeout <= 0 {
		return fmt.Errorf("FLASHGATE_SHUTDOWN_TIMEOUT must be positive, got %s", c.ShutdownTimeout)
	}
	if _, err := c.waitingSecret(); err != nil {
		return err
	}
	if err := c.validateIdentity(); err != nil {
		return err
	}
	if err := c.validateOrigins(); err != nil {
		return err
	}
	if err := (server.Options{PageDir: c.PageDir}).Validate(); err != nil {
		return fmt.Errorf("FLASHGATE_PAGE_DIR: %w", err)
	}
	if err := (server.Options{PageLocaleDir: c.PageLocaleDir, PageLanguage: c.PageLanguage}).Validate(); err != nil {
		return fmt.Errorf("FLASHGATE_PAGE_LOCALE_DIR or FLASHGATE_PAGE_LANGUAGE: %w", err)
	}
	if err := (server.Options{Beacon: c.Beacon}).Validate(); err != nil {
		return fmt.Errorf("FLASHGATE_BEACON: %w", err)
	}
	if err := c.validatePprof(); err != nil {
		return err
	}
	if err := c.validateMetrics(); err != nil {
		return err
	}
	if n := len(c.AdminToken); n > 0 && n < server.MinAdminToken {
		// A short token is guessed: the admin API can ban, revoke and close.
		return fmt.Errorf("FLASHGATE_ADMIN_TOKEN must be at least %d bytes, got %d (try: openssl rand -base64 32); "+
			"unset it to disable the admin API", server.MinAdminToken, n)
	}
	return c.validateLimits()
}

// validatePprof checks FLASHGATE_PPROF_ADDR (privateAddr's rules, switch
// FLASHGATE_INSECURE_PPROF): the profiler answers anyone who reaches it, and
// what it serves (heap contents, goroutine stacks, the command line) must
// not leave the machine by accident.
func (c *serveConfig) validatePprof() error {
	return privateAddr("FLASHGATE_PPROF_ADDR", c.PprofAddr, "127.0.0.1:6060", "FLASHGATE_INSECURE_PPROF", c.InsecurePprof,
		"the profiler exposes memory contents and answers anyone")
}

// validateMetrics checks FLASHGATE_METRICS_ADDR (privateAddr's rules,
// switch FLASHGATE_INSECURE_METRICS): the metrics name every room and its
// sales.
func (c *serveConfig) validateMetrics() error {
	return privateAddr("FLASHGATE_METRICS_ADDR", c.MetricsAddr, "127.0.0.1:9090", "FLASHGATE_INSECURE_METRICS", c.InsecureMetrics,
		"the metrics list every room and its sales and answer anyone")
}

// privateAddr checks the listen address addr of variable name: empty
// (off), or host:port (example) whose host is a loopback IP address or
// "localhost" — unless the insecure switch (variable insecureName) is set,
// which allows any host (an empty host means every interface). why says
// what would leak.
func privateAddr(name, addr, example, insecureName string, insecure bool, why string) error {
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s must be host:port, e.g. %s: %w", name, example, err)
	}
	if insecure {
		return nil
	}
	if ip, err := netip.ParseAddr(host); (err == nil && ip.IsLoopback()) || host == "localhost" {
		return nil
	}
	_, port, _ := net.SplitHostPort(example)
	return fmt.Errorf("%s %q is not a loopback address (e.g. %s, [::1]:%s, localhost:%s): "+
		"%s; set %s=true to serve it there anyway", name, addr, example, port, port, why, insecureName)
}

// validateOrigins checks FLASHGATE_RETURN_ORIGINS and FLASHGATE_CORS_ORIGINS
// (server.Options.Validate's rules), each under its own name.
func (c *serveConfig) validateOrigins() error {
	for _, l := range [][]string{c.ReturnOrigins, c.CORSOrigins} {
		for i, o := range l {
			l[i] = strings.TrimSpace(o)
		}
	}
	if err := (server.Options{ReturnOrigins: c.ReturnOrigins}).Validate(); err != nil {
		return fmt.Errorf("FLASHGATE_RETURN_ORIGINS: %w", err)
	}
	if err := (server.Options{CORSOrigins: c.CORSOrigins}).Validate(); err != nil {
		return fmt.Errorf("FLASHGATE_CORS_ORIGINS: %w", err)
	}
	return nil
}

// validateLimits checks the enter limits and the proxy settings; the
// bounds are the server's (server.Options.Validate).
func (c *serveConfig) validateLimits() error {
	if c.EnterWindow < time.Second || c.EnterWindow%time.Second != 0 {
		return fmt.Errorf("FLASHGATE_ENTER_WINDOW must be whole seconds, at least 1s, got %s", c.EnterWindow)
	}
	if c.AutoRoomWindow < time.Second {
		return fmt.Errorf("FLASHGATE_AUTO_ROOM_WINDOW must be at least 1s, got %s", c.AutoRoomWindow)
	}
	if c.AddressPrefixV4 < 1 || c.AddressPrefixV4 > 32 || c.AddressPrefixV6 < 1 || c.AddressPrefixV6 > 128 {
		return fmt.Errorf("FLASHGATE_ADDRESS_PREFIX_V4 must be 1 … 32 and FLASHGATE_ADDRESS_PREFIX_V6 1 … 128, got %d and %d",
			c.AddressPrefixV4, c.AddressPrefixV6)
	}
	c.ProxyHeader = strings.TrimSpace(c.ProxyHeader)
	for i, p := range c.TrustedProxies {
		c.TrustedProxies[i] = strings.TrimSpace(p)
	}
	if c.ProxyHeader == "" && len(c.TrustedProxies) > 0 {
		return fmt.Errorf("FLASHGATE_TRUSTED_PROXIES has no effect without FLASHGATE_PROXY_HEADER")
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"FLASHGATE_STREAMS_PER_USER", c.StreamsPerUser}, {"FLASHGATE_STREAMS_PER_ADDRESS", c.StreamsPerAddress},
		{"FLASHGATE_MAX_STREAMS", c.MaxStreams}, {"FLASHGATE_MAX_CONNS_PER_IP", c.MaxConnsPerIP}, {"FLASHGATE_CONCURRENCY", c.Concurrency}} {
		if v.n < 0 {
			return fmt.Errorf("%s must be >= 0 (0: no limit, or fasthttp's default), got %d", v.name, v.n)
		}
	}
	opts := c.serverOptions()
	opts.EnterPerAddress = c.EnterPerAddress         // as set, even where it is not applied
	opts.AutoRoomsPerAddress = c.AutoRoomsPerAddress // likewise
	opts.Identity = server.IdentityHeader            // validateIdentity's; the key comes later
	opts.EnterPoW = 0                                // validateIdentity's too (it needs visitor mode)
	opts.AdminToken = ""                             // validateAdmin's
	if err := opts.Validate(); err != nil {
		return fmt.Errorf("FLASHGATE_*_PER_*, FLASHGATE_PROXY_HEADER, FLASHGATE_TRUSTED_PROXIES: %w", err)
	}
	return nil
}

// issuerConfig is the issuer's configuration from the environment: every
// setting, none of the dependencies (Redis, Signer, the waiting secret, the
// logger), which serve adds.
func (c *serveConfig) issuerConfig() issuer.Config {
	ic := issuer.Config{Issuer: c.Issuer, Audience: c.Audience, DefaultRoom: c.defaultRoom(),
		CompletionReplicas: c.CompletionReplicas, CompletionTimeout: c.CompletionTimeout,
		StatusSnapshot: c.StatusSnapshot, ScriptBatch: c.ScriptBatch, RoomRetention: c.RoomRetention,
		LostRooms: issuer.LostRoomPolicy(c.LostRooms)}
	c.offSettings(&ic)
	return ic
}

// offSetting is one variable of offSettings, as the operator set it.
type offSetting struct {
	name     string // the variable
	value    string // its value as written back (for errors)
	zero     bool   // set to the deprecated 0
	negative bool   // set below 0: refused
}

// offSettings is the one mapping of the variables that the word off turns
// off to issuer.Config, whose 0 means "the default" (a Go struct's "not
// set") and whose off has a name (issuer.NoAutoRoomLimit,
// AutoRoomNeverIdle, NoJournal, ArrivalWindowOff): it sets those fields of
// ic (ic.DefaultRoom's when it is set; unset variables give the packages'
// defaults through their envDefault tags; off, and 0, the named off
// values) and returns the variables for validate and deprecations. 0 is
// deprecated (keptZero false) except for FLASHGATE_DEFAULT_ARRIVAL_WINDOW,
// a room setting whose 0 is off as the admin API's arrival_window_ms 0 is.
// A new such setting is a row here, an offOr field and a line in
// TestServeEnvOff.
func (c *serveConfig) offSettings(ic *issuer.Config) []offSetting {
	window := new(time.Duration) // no default room: mapped, then dropped
	if ic.DefaultRoom != nil {
		window = &ic.DefaultRoom.ArrivalWindow
	}
	return []offSetting{
		mapOff("FLASHGATE_MAX_AUTO_ROOMS", c.MaxAutoRooms, issuer.NoAutoRoomLimit, &ic.MaxAutoRooms, false),
		mapOff("FLASHGATE_AUTO_ROOM_IDLE", c.AutoRoomIdle, issuer.AutoRoomNeverIdle, &ic.AutoRoomIdle, false),
		mapOff("FLASHGATE_JOURNAL_MAXLEN", c.JournalMaxLen, issuer.NoJournal, &ic.JournalMaxLen, false),
		mapOff("FLASHGATE_DEFAULT_ARRIVAL_WINDOW", c.DefaultArrivalWindow, issuer.ArrivalWindowOff, window, true),
	}
}

// mapOff sets *dst to v's value, or to off when v is off or 0, and
// describes v as an offSetting named name (its 0 deprecated unless
// keptZero).
func mapOff[T offNumber](name string, v offOr[T], off T, dst *T, keptZero bool) offSetting {
	*dst = v.n
	if v.off || v.zero {
		*dst = off
	}
	return offSetting{name: name, value: v.String(), zero: v.zero && !keptZero, negative: !v.off && v.n < 0}
}

// offInt, offInt64 and offDuration are the offOr variables' types.
type (
	offInt      = offOr[int]
	offInt64    = offOr[int64]
	offDuration = offOr[time.Duration]
)

// offNumber is what an offOr holds: a count, or a duration (Go syntax).
type offNumber interface{ int | int64 | time.Duration }

// offOr is a variable that takes a number (or a Go duration) or the word
// off (any case). Its 0 means off too, deprecated for one release (serve
// warns; it will then be refused, never silently become the default): in
// the environment, unset is the default and off is written off, so 0 has
// no meaning of its own, unlike in issuer.Config.
type offOr[T offNumber] struct {
	n    T    // the value; 0 when off
	off  bool // the word off
	zero bool // 0: off, deprecated
}

// UnmarshalText reads off (any case), a Go duration for
// offOr[time.Duration], else a base-10 integer. Errors: strconv's or
// time.ParseDuration's.
func (o *offOr[T]) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	*o = offOr[T]{}
	if strings.EqualFold(s, "off") {
		o.off = true
		return nil
	}
	var n T
	switch p := any(&n).(type) {
	case *time.Duration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*p = d
	default:
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		n = T(i)
	}
	o.n, o.zero = n, n == 0
	return nil
}

// String is o as the operator writes it: off, or the value.
func (o offOr[T]) String() string {
	if o.off {
		return "off"
	}
	if d, ok := any(o.n).(time.Duration); ok {
		return d.String()
	}
	return fmt.Sprint(int64(o.n))
}

// serverOptions is the server's options from the environment, without the
// Issuer, Keys, Logger and RedisHealth, which serve adds.
func (c *serveConfig) serverOptions() server.Options {
	return server.Options{AdminToken: c.AdminToken, UserHeader: c.UserHeader,
		EnterPerUser: c.EnterPerUser, EnterPerAddress: c.enterPerAddress(), EnterWindow: c.EnterWindow,
		StatusPerUser: c.StatusPerUser, ExchangePerUser: c.ExchangePerUser, LeavePerUser: c.LeavePerUser,
		CompletePerUser: c.CompletePerUser, AutoRoomsPerAddress: c.autoRoomsPerAddress(), AutoRoomWindow: c.AutoRoomWindow,
		AddressPrefixV4: c.AddressPrefixV4, AddressPrefixV6: c.AddressPrefixV6,
		ProxyHeader: c.ProxyHeader, TrustedProxies: c.TrustedProxies, RedisTimeout: c.RedisTimeout,
		Identity: c.Identity, CookieDomain: c.CookieDomain, InsecureCookies: c.InsecureCookies, EnterPoW: c.EnterPoW,
		ReturnOrigins: c.ReturnOrigins, CORSOrigins: c.CORSOrigins, PageDir: c.PageDir,
		PageLocaleDir: c.PageLocaleDir, PageLanguage: c.PageLanguage,
		AccessLog: c.AccessLog, StreamsPerUser: c.StreamsPerUser, StreamsPerAddress: c.streamsPerAddress(),
		MaxStreams: c.MaxStreams, MaxConnsPerIP: c.MaxConnsPerIP, Concurrency: c.Concurrency, NoMetricsRoute: c.MetricsAddr != "",
		DirectiveMaxAge: c.DirectiveMaxAge, Beacon: c.Beacon}
}

// validateIdentity checks FLASHGATE_IDENTITY, FLASHGATE_VISITOR_KEY,
// FLASHGATE_COOKIE_DOMAIN and FLASHGATE_ENTER_POW.
func (c *serveConfig) validateIdentity() error {
	switch c.Identity {
	case server.IdentityHeader, server.IdentityVisitor:
	default:
		return fmt.Errorf("FLASHGATE_IDENTITY must be %s or %s, got %q", server.IdentityHeader, server.IdentityVisitor, c.Identity)
	}
	if _, err := c.visitorKey(); err != nil {
		return err
	}
	if err := (server.Options{CookieDomain: c.CookieDomain}).Validate(); err != nil {
		return fmt.Errorf("FLASHGATE_COOKIE_DOMAIN: %w", err)
	}
	if c.EnterPoW < 0 || c.EnterPoW > server.MaxEnterPoW {
		return fmt.Errorf("FLASHGATE_ENTER_POW must be 0 (off) … %d bits, got %d", server.MaxEnterPoW, c.EnterPoW)
	}
	if c.EnterPoW > 0 && c.Identity != server.IdentityVisitor {
		return fmt.Errorf("FLASHGATE_ENTER_POW needs FLASHGATE_IDENTITY=visitor (in header mode your gateway authenticates users)")
	}
	return nil
}

// visitorKey decodes FLASHGATE_VISITOR_KEY; nil when unset.
func (c *serveConfig) visitorKey() ([]byte, error) {
	return decodeKey("FLASHGATE_VISITOR_KEY", c.VisitorKey)
}

// visitorKeyLabel is the message whose HMAC under the waiting-token secret
// is the visitor key when FLASHGATE_VISITOR_KEY is unset.
const visitorKeyLabel = "flashgate visitor v1"

// deriveVisitorKey is HMAC-SHA256(waiting secret, "flashgate visitor v1"):
// every replica that shares the waiting secret agrees on it, and it
// reveals nothing of the secret.
func deriveVisitorKey(waitingSecret []byte) []byte {
	m := hmac.New(sha256.New, waitingSecret)
	m.Write([]byte(visitorKeyLabel))
	return m.Sum(nil)
}

// addressKnown reports whether the per-address limits apply: with a proxy
// header (the client address is then the header's), or in visitor mode.
// In header mode without one, flashgate runs behind the gateway that sets
// the user header, every request's TCP peer is that gateway, and the user
// id (which the gateway authenticated) is the only thing to limit. In
// visitor mode every request without a cookie mints a new user, so the
// address is all there is: without a proxy header the browser is taken to
// reach flashgate directly and the TCP peer is the client (behind an
// undeclared proxy every visitor would share one budget: serve logs that).
func (c *serveConfig) addressKnown() bool {
	return c.ProxyHeader != "" || c.Identity == server.IdentityVisitor
}

// enterPerAddress is the per-address enter limit in effect (addressKnown).
func (c *serveConfig) enterPerAddress() int {
	if !c.addressKnown() {
		return 0
	}
	return c.EnterPerAddress
}

// streamsPerAddress is the per-address stream limit in effect (addressKnown).
func (c *serveConfig) streamsPerAddress() int {
	if !c.addressKnown() {
		return 0
	}
	return c.StreamsPerAddress
}

// autoRoomsPerAddress is the per-address auto-room limit in effect: where
// the address is known and FLASHGATE_DEFAULT_ROOM creates rooms.
func (c *serveConfig) autoRoomsPerAddress() int {
	if !c.addressKnown() || c.DefaultRoom == "off" {
		return 0
	}
	return c.AutoRoomsPerAddress
}

// defaultRoom is the policy for rooms created on first enter, or nil (off).
func (c *serveConfig) defaultRoom() *issuer.RoomConfig {
	if c.DefaultRoom == "off" {
		return nil
	}
	ic := issuer.Config{DefaultRoom: &issuer.RoomConfig{Capacity: c.DefaultCapacity, RatePerMinute: c.DefaultRate,
		SessionDuration: c.DefaultSessionDuration, Tick: c.DefaultTick, State: issuer.RoomState(c.DefaultRoom),
		TickBatch: issuer.DefaultTickBatch, PreQueue: issuer.PreQueue(c.DefaultPreQueue)}}
	c.offSettings(&ic) // ArrivalWindow
	return ic.DefaultRoom
}

// waitingSecret decodes FLASHGATE_WAITING_SECRET (standard or URL-safe
// base64, padded or not); nil when unset.
func (c *serveConfig) waitingSecret() ([]byte, error) {
	return decodeKey("FLASHGATE_WAITING_SECRET", c.WaitingSecret)
}

// decodeKey decodes the base64 key in variable name (standard or URL-safe,
// padded or not) of at least 32 bytes; nil when unset.
func decodeKey(name, value string) ([]byte, error) {
	if value == "" {
		return nil, nil
	}
	s := strings.TrimSpace(value)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) < 32 {
				return nil, fmt.Errorf("%s must decode to at least 32 bytes, got %d (try: openssl rand -base64 32)", name, len(b))
			}
			return b, nil
		}
	}
	return nil, fmt.Errorf("%s is not base64 (try: openssl rand -base64 32)", name)
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("FLASHGATE_LOG_LEVEL must be debug, info, warn or error, got %q", s)
	}
	return l, nil
}

func newLogger(w io.Writer, level, format string) *slog.Logger {
	return slog.New(newHandler(w, level, format))
}

func newHandler(w io.Writer, level, format string) slog.Handler {
	l, _ := parseLevel(level)
	opts := &slog.HandlerOptions{Level: l}
	if format == "json" {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}

// newBufferedLogger is newLogger writing through a logbuf.Writer flushed
// every flush and at every WARN or ERROR record (flush 0: newLogger, and
// close does nothing). close flushes and stops the writer.
func newBufferedLogger(w io.Writer, level, format string, flush time.Duration) (log *slog.Logger, close func()) {
	if flush <= 0 {
		return newLogger(w, level, format), func() {}
	}
	b := logbuf.New(w, 0, flush)
	return slog.New(logbuf.FlushOn(newHandler(b, level, format), slog.LevelWarn, b.Flush)), func() { _ = b.Close() }
}

// envVar is one documented environment variable: def is its envDefault
// ("" if none), required whether the env tag says ",required".
type envVar struct {
	name, def, help, field string
	required               bool
}

// envDoc lists the variables of v (a struct), following envPrefix.
func envDoc(t reflect.Type, prefix string) []envVar {
	var out []envVar
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Type.Kind() == reflect.Struct && f.Tag.Get("env") == "" {
			out = append(out, envDoc(f.Type, prefix+f.Tag.Get("envPrefix"))...)
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("env"), ",")
		if name == "" {
			continue
		}
		out = append(out, envVar{name: prefix + name, def: f.Tag.Get("envDefault"), help: f.Tag.Get("help"), field: f.Name,
			required: slices.Contains(strings.Split(opts, ","), "required")})
	}
	return out
}

// writeEnvDocOf prints the environment struct t as a table.
func writeEnvDocOf(w io.Writer, t reflect.Type) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  VARIABLE\tDEFAULT\tMEANING")
	for _, v := range envDoc(t, "") {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", v.name, v.defaultWord(), v.help)
	}
	_ = tw.Flush()
}

// defaultWord is v's default as -h and docs/configuration.md show it:
// the envDefault, "(required)", or "(unset)".
func (v envVar) defaultWord() string {
	switch {
	case v.def != "":
		return v.def
	case v.required:
		return "(required)"
	}
	return "(unset)"
}
