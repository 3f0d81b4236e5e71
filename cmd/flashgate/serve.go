package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"reflect"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/sethvargo/go-retry"

	"github.com/flashgate/flashgate/internal/redisconn"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/journal"
	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/server"
)

const embeddedWarning = "quick start only: state is in memory, single process"

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runEnvCommand(ctx, envCommand[serveEnv]{
		name:  "serve",
		about: "Runs the issuer server (HTTP API, admission tick loop).",
		stop:  "shuts it down gracefully",
		env:   reflect.TypeOf(serveEnv{}),
		load:  func() (serveEnv, error) { return loadServeEnv(nil) },
		log: func(c serveEnv) (string, string, time.Duration) {
			return c.Serve.LogLevel, c.Serve.LogFormat, c.Serve.LogFlush
		},
		run: serve,
	}, args, stdout, stderr)
}

// envCommand is a long-running command configured by environment variables
// only (serve, journal run): -h prints the variables, arguments are refused,
// a bad environment is a usage error naming the variable, and a failure of
// run is logged through the command's own logger.
type envCommand[C any] struct {
	name, about, stop string // "journal run"; one sentence; what SIGINT/SIGTERM does
	env               reflect.Type
	load              func() (C, error)
	// log: the command's log level, format and flush interval (0: every line at once).
	log func(C) (level, format string, flush time.Duration)
	run func(context.Context, C, *slog.Logger) error
}

func runEnvCommand[C any](ctx context.Context, cmd envCommand[C], args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: flashgate %s\n\n%s It is configured by environment variables:\n\n", cmd.name, cmd.about)
		writeEnvDocOf(fs.Output(), cmd.env)
		fmt.Fprintf(fs.Output(), "\nSIGINT or SIGTERM %s.\n", cmd.stop)
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "flashgate %s: unexpected argument %q (configuration comes from the environment; see -h)\n", cmd.name, fs.Arg(0))
		return exitUsage
	}
	cfg, err := cmd.load()
	if err != nil {
		fmt.Fprintf(stderr, "flashgate %s: %v\n", cmd.name, err)
		return exitUsage
	}
	level, format, flush := cmd.log(cfg)
	log, closeLog := newBufferedLogger(stderr, level, format, flush)
	defer closeLog()
	if err := cmd.run(ctx, cfg, log); err != nil {
		log.Error("flashgate "+cmd.name+" failed", "err", err)
		return exitFailure
	}
	return exitOK
}

func serve(ctx context.Context, cfg serveEnv, log *slog.Logger) error {
	c := cfg.Serve
	log.Info("flashgate starting", "version", versionString(), "addr", c.Addr)

	// Queue store.
	var rdb redis.UniversalClient
	embedded := cfg.RedisURL == ""
	if embedded {
		m := miniredis.NewMiniRedis()
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			return fmt.Errorf("start embedded redis: %w", err)
		}
		defer m.Close()
		log.Warn("!!! REDIS_URL IS NOT SET: EMBEDDED IN-PROCESS REDIS — " + embeddedWarning +
			"; set REDIS_URL for anything real !!!")
		rdb = redis.NewClient(&redis.Options{Addr: m.Addr()})
	} else {
		var err error
		if rdb, _, err = redisconn.Open(cfg.RedisURL); err != nil {
			return fmt.Errorf("REDIS_URL: %w", err)
		}
		log.Info("queue store", "redis", redactURL(cfg.RedisURL))
	}
	redisconn.LogTo(log)
	// Fail fast while Redis is down: consecutive connection failures open
	// the breaker, commands then fail at once (503 unavailable), and a probe
	// closes it when Redis answers again.
	breaker := redisconn.Protect(rdb, redisconn.BreakerOptions{Logger: log})
	defer func() {
		log.Info("shutdown: closing the Redis connections")
		breaker.Close()
		_ = rdb.Close()
	}()
	if err := waitForRedis(ctx, rdb, c.RedisWait, log); err != nil {
		if ctx.Err() != nil { // SIGTERM while waiting: nothing to drain
			log.Info("shutdown: signal received while waiting for Redis", "err", err)
			return nil
		}
		return err
	}

	// Keys and secrets.
	ring, err := keys.OpenFile(c.KeysFile, keys.FileOptions{CreateIfMissing: true, Logger: log})
	if err != nil {
		return err
	}
	log.Info("signing keys loaded", "file", c.KeysFile, "active_kid", ring.ActiveKeyID())
	secret, err := c.waitingSecret()
	if err != nil {
		return err
	}
	shared := secret == nil
	if shared {
		if secret, err = issuer.LoadOrCreateSecret(ctx, rdb); err != nil {
			return fmt.Errorf("waiting-token secret: %w", err)
		}
		log.Info("waiting-token secret shared through Redis (set FLASHGATE_WAITING_SECRET to manage it yourself)")
	}

	icfg := c.issuerConfig()
	icfg.Redis, icfg.Signer, icfg.WaitingSecret, icfg.SharedSecret, icfg.Logger = rdb, ring, secret, shared, log
	if icfg.LotteryKey, err = decodeKey("FLASHGATE_LOTTERY_KEY", c.LotteryKey); err != nil {
		return err
	}
	if c.BeaconURL != "" {
		icfg.Beacon = &issuer.Beacon{URL: c.BeaconURL, Chain: issuer.Quicknet}
	}
	is, err := issuer.New(icfg)
	if err != nil {
		return err
	}
	if d := c.defaultRoom(); d != nil {
		log.Info("unknown rooms are created on first enter", "state", d.State, "capacity", d.Capacity,
			"rate_per_minute", d.RatePerMinute, "session", d.SessionDuration, "tick", d.Tick, "arrival_window", d.ArrivalWindow,
			"prequeue", d.PreQueue)
	}
	if c.AdminToken == "" {
		log.Warn("FLASHGATE_ADMIN_TOKEN is not set: the admin API is disabled")
	}
	for _, msg := range c.deprecations() {
		log.Warn(msg)
	}
	opts := c.serverOptions()
	opts.Issuer, opts.Keys, opts.Logger, opts.RedisHealth, opts.RedisPool = serverRoles(is), ring, log, breaker, rdb.PoolStats
	if c.Identity == server.IdentityVisitor {
		if opts.VisitorKey, err = c.visitorKey(); err != nil {
			return err
		}
		if opts.VisitorKey == nil {
			opts.VisitorKey = deriveVisitorKey(secret)
		}
		log.Info("visitor identity: browsers are identified by a signed cookie; the user header is ignored",
			"visitor_key", map[bool]string{true: "derived from the waiting-token secret", false: "FLASHGATE_VISITOR_KEY"}[c.VisitorKey == ""],
			"cookie_domain", c.CookieDomain, "per_address_limit", c.enterPerAddress(), "enter_pow_bits", c.EnterPoW)
		if c.enterPerAddress() == 0 {
			log.Warn("visitor identity without a per-address enter limit (FLASHGATE_ENTER_PER_ADDRESS=0): " +
				"anyone can mint visitors, and take places in line, at will")
		}
	}
	if c.InsecureCookies {
		log.Warn("FLASHGATE_INSECURE_COOKIES is set: cookies lack Secure (plain-http localhost development only)")
	}
	if c.JournalDSN != "" {
		st, err := openJournalReader(ctx, c.JournalDSN, log)
		if err != nil {
			return fmt.Errorf("FLASHGATE_JOURNAL_DSN: %w", err)
		}
		defer st.Close()
		opts.Journal = st
	}
	srv, err := server.New(opts)
	if err != nil {
		return err
	}
	rdb.AddHook(srv.RedisHook()) // script latency and errors, after the breaker's hook
	log.Info("event stream limits (in memory, per replica)", "per_user_and_room", c.StreamsPerUser,
		"per_address", c.streamsPerAddress(), "max_conns_per_ip", c.MaxConnsPerIP, "concurrency", c.Concurrency)
	log.Info("rate limits (in memory, per replica)", "enter_per_user", c.EnterPerUser,
		"enter_per_address", c.enterPerAddress(), "window", c.EnterWindow, "status_per_user", c.StatusPerUser,
		"exchange_per_user", c.ExchangePerUser, "leave_per_user", c.LeavePerUser, "complete_per_user", c.CompletePerUser,
		"auto_rooms_per_address", c.autoRoomsPerAddress(), "auto_room_window", c.AutoRoomWindow,
		"proxy_header", c.ProxyHeader, "trusted_proxies", c.TrustedProxies,
		"address_prefix_v4", c.AddressPrefixV4, "address_prefix_v6", c.AddressPrefixV6)
	switch {
	case c.ProxyHeader != "":
	case c.Identity == server.IdentityVisitor && c.EnterPerAddress > 0:
		log.Warn("visitor mode without FLASHGATE_PROXY_HEADER: the per-address limits apply to the TCP peer; " +
			"behind a proxy or CDN every visitor shares its budget: set FLASHGATE_PROXY_HEADER and FLASHGATE_TRUSTED_PROXIES")
	case c.EnterPerAddress > 0:
		log.Info("per-address enter limit off: FLASHGATE_PROXY_HEADER is not set, so every request " +
			"carries the gateway's address; set it and FLASHGATE_TRUSTED_PROXIES to limit per client address")
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return err
	}
	if c.PprofAddr != "" {
		stopPprof, err := servePprof(c.PprofAddr, log)
		if err != nil {
			_ = ln.Close()
			return err
		}
		defer stopPprof()
	}
	if c.MetricsAddr != "" {
		stopMetrics, err := serveMetrics(c.MetricsAddr, srv.MetricsHandler(), log)
		if err != nil {
			_ = ln.Close()
			return err
		}
		defer stopMetrics()
	} else {
		log.Info("/metrics is served on the API's listener: it names every room and its sales; " +
			"block it at your gateway or set FLASHGATE_METRICS_ADDR to serve it on its own")
	}

	served := make(chan error, 1)
	go func() { served <- srv.Listen(ln) }()
	tickCtx, stopTick := context.WithCancel(context.WithoutCancel(ctx))
	defer stopTick()
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		_ = is.Run(tickCtx)
	}()
	log.Info("flashgate listening", "addr", ln.Addr().String(), "admin_api", c.AdminToken != "")
	if embedded {
		log.Warn("!!! REMINDER: EMBEDDED REDIS — " + embeddedWarning + " !!!")
	}

	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutdown: signal received, no longer accepting connections; draining in-flight requests",
			"timeout", c.ShutdownTimeout)
	case serveErr = <-served:
		log.Error("HTTP server stopped unexpectedly", "err", serveErr)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown: in-flight requests did not finish in time", "err", err)
	} else {
		log.Info("shutdown: HTTP server drained")
	}
	if serveErr == nil {
		if err := <-served; err != nil && !errors.Is(err, net.ErrClosed) {
			log.Warn("shutdown: listener", "err", err)
		}
	}
	log.Info("shutdown: stopping the admission tick loop")
	stopTick()
	<-ticked
	log.Info("shutdown: tick loop stopped")
	return serveErr
}

// waitForRedis pings rdb until it answers: at once, then after 250 ms
// doubling to at most 10 s (±10 % jitter), each ping bounded by 5 s. It
// logs the first failure and then every attempt at WARN, and Redis's
// arrival at INFO. It returns nil once Redis answers; an error when ctx
// ends (SIGTERM while waiting) or after wait (FLASHGATE_REDIS_WAIT; 0: no
// bound). A pod started during a Redis failover thus waits for the new
// master instead of exiting (and crash-looping) after one ping.
func waitForRedis(ctx context.Context, rdb redis.UniversalClient, wait time.Duration, log *slog.Logger) error {
	start := time.Now()
	b := retry.WithJitterPercent(10, retry.WithCappedDuration(10*time.Second, retry.NewExponential(250*time.Millisecond)))
	if wait > 0 {
		b = retry.WithMaxDuration(wait, b)
	}
	attempt := 0
	var last error
	err := retry.Do(ctx, b, func(ctx context.Context) error {
		attempt++
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if last = rdb.Ping(pctx).Err(); last != nil {
			log.Warn("waiting for Redis", "attempt", attempt, "waited", time.Since(start).Round(time.Millisecond), "err", last)
			return retry.RetryableError(last)
		}
		return nil
	})
	switch {
	case err == nil:
		if attempt > 1 {
			log.Info("redis answers", "attempts", attempt, "waited", time.Since(start).Round(time.Millisecond))
		}
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("stopped while waiting for Redis (%d attempts): %w", attempt, last)
	default:
		return fmt.Errorf("redis does not answer after %s (FLASHGATE_REDIS_WAIT, %d attempts): %w", wait, attempt, last)
	}
}

// servePprof serves net/http/pprof's handlers (/debug/pprof/ and below) on
// addr (FLASHGATE_PPROF_ADDR, checked by serveConfig.validatePprof) on an
// http.Server of their own — never on the public API's fiber app — and
// returns the function that closes it (at shutdown; a profile being taken
// is cut short). The error is the listener's.
func servePprof(addr string, log *slog.Logger) (stop func(), err error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return serveAside("FLASHGATE_PPROF_ADDR", "pprof", addr, mux, log, slog.LevelWarn,
		"pprof profiler listening: profiles expose memory contents, keep this address private", "/debug/pprof/")
}

// serveMetrics serves /metrics (h: server.Server.MetricsHandler) on addr
// (FLASHGATE_METRICS_ADDR, checked by serveConfig.validateMetrics) on an
// http.Server of its own, as servePprof.
func serveMetrics(addr string, h http.Handler, log *slog.Logger) (stop func(), err error) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	return serveAside("FLASHGATE_METRICS_ADDR", "metrics", addr, mux, log, slog.LevelInfo,
		"metrics listening on their own address (not the API's)", "/metrics")
}

// serveAside serves h on addr (the value of variable name) on an
// http.Server of its own, logs listening at level, and returns the
// function that closes it. The error is the listener's.
func serveAside(name, what, addr string, h http.Handler, log *slog.Logger, level slog.Level, listening, paths string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn(what+" server stopped", "err", err)
		}
	}()
	log.Log(context.Background(), level, listening, "addr", ln.Addr().String(), "paths", paths)
	return func() {
		_ = hs.Close()
		log.Info("shutdown: " + what + " server closed")
	}, nil
}

// openJournalReader connects the admin journal routes to the journal at dsn.
// PostgreSQL away at start is logged, not fatal: the waiting room does not
// depend on its journal, and the routes answer 503 until it is back.
func openJournalReader(ctx context.Context, dsn string, log *slog.Logger) (*journal.Store, error) {
	st, err := journal.Connect(dsn)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := st.Ping(pctx); err != nil {
		log.Warn("the journal does not answer yet: the admin journal routes answer 503 until it does", "err", err)
	} else {
		log.Info("journal reader", "admin_routes", "/admin/rooms/{room}/journal, /admin/rooms/{room}/journal/report")
	}
	return st, nil
}

// redactURL hides the password of a URL for logs.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
