package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flashgate/flashgate/internal/redisconn"
	"github.com/flashgate/flashgate/journal"
	"github.com/flashgate/flashgate/journal/consumer"
)

const journalUsage = `Usage: flashgate journal <subcommand>

  run      copy the rooms' journal streams from Redis into PostgreSQL (configured by
           environment variables; "flashgate journal run -h" lists them)
  show --room R --user U [--all] [--json] [--dsn URL]
           a buyer's entries in the journal
  report --room R [--epoch E] [--json] [--dsn URL]
           a room's outcomes and wait p50/p95 per minute, from the journal

Run "flashgate journal <subcommand> -h" for its flags.
`

// runJournal dispatches `flashgate journal run|show|report`.
func runJournal(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, journalUsage)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return runJournalRun(ctx, args[1:], stdout, stderr)
	case "show":
		return runJournalShow(ctx, args[1:], stdout, stderr)
	case "report":
		return runJournalReport(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, journalUsage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "flashgate journal: unknown command %q\n\n%s", args[0], journalUsage)
		return exitUsage
	}
}

// journalEnv is the environment of `flashgate journal run`; `-h` prints it.
// REDIS_URL is read as serve reads it (internal/redisconn), but required:
// the journal has no embedded Redis to read.
type journalEnv struct {
	RedisURL string        `env:"REDIS_URL,required" help:"the queue store serve uses (redis://, rediss://, redis+sentinel://, redis+cluster://; see flashgate serve -h); required"`
	Journal  journalConfig `envPrefix:"FLASHGATE_"`
}

// journalConfig is the FLASHGATE_* part of journalEnv.
type journalConfig struct {
	DSN       string        `env:"JOURNAL_DSN,required" help:"PostgreSQL URL or key=value DSN of the journal (pgx); its schema is migrated at start; required"`
	Listen    string        `env:"JOURNAL_LISTEN" envDefault:"127.0.0.1:9091" help:"listen address of /metrics, /healthz and /readyz"`
	MaxLag    time.Duration `env:"JOURNAL_MAX_LAG" envDefault:"30s" help:"/readyz answers 503 while any room's oldest unwritten journal entry is older than this"`
	Consumer  string        `env:"JOURNAL_CONSUMER" help:"this process's consumer name in the flashgate-journal group; unset: <hostname>-<pid>"`
	Batch     int           `env:"JOURNAL_BATCH" envDefault:"1000" help:"most stream entries read and written per room and batch (1 … 1000)"`
	LogLevel  string        `env:"LOG_LEVEL" envDefault:"info" help:"debug | info | warn | error"`
	LogFormat string        `env:"LOG_FORMAT" envDefault:"json" help:"text | json"`
}

// loadJournalEnv parses the environment (nil: the process's).
func loadJournalEnv(environ map[string]string) (journalEnv, error) {
	var c journalEnv
	opts := env.Options{}
	if environ != nil {
		opts.Environment = environ
	}
	if err := env.ParseWithOptions(&c, opts); err != nil {
		return c, envErrorOf(reflect.TypeOf(journalEnv{}), err)
	}
	j := c.Journal
	if _, err := parseLevel(j.LogLevel); err != nil {
		return c, err
	}
	if j.LogFormat != "text" && j.LogFormat != "json" {
		return c, fmt.Errorf("FLASHGATE_LOG_FORMAT must be text or json, got %q", j.LogFormat)
	}
	if j.MaxLag <= 0 {
		return c, fmt.Errorf("FLASHGATE_JOURNAL_MAX_LAG must be positive, got %s", j.MaxLag)
	}
	if j.Batch < 1 || j.Batch > consumer.MaxBatch {
		return c, fmt.Errorf("FLASHGATE_JOURNAL_BATCH must be 1 … %d, got %d", consumer.MaxBatch, j.Batch)
	}
	return c, nil
}

func runJournalRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runEnvCommand(ctx, envCommand[journalEnv]{
		name: "journal run",
		about: "Copies every room's journal stream (fg:{room}:journal) from Redis into PostgreSQL with the " +
			"consumer group flashgate-journal (run several for availability).",
		stop: "stops it after the batch in flight",
		env:  reflect.TypeOf(journalEnv{}),
		load: func() (journalEnv, error) { return loadJournalEnv(nil) },
		log:  func(c journalEnv) (string, string, time.Duration) { return c.Journal.LogLevel, c.Journal.LogFormat, 0 },
		run:  journalRun,
	}, args, stdout, stderr)
}

func journalRun(ctx context.Context, cfg journalEnv, log *slog.Logger) error {
	j := cfg.Journal
	log.Info("flashgate journal starting", "version", versionString(), "listen", j.Listen)
	if err := journal.Migrate(ctx, j.DSN); err != nil {
		return err
	}
	store, err := journal.Open(ctx, j.DSN)
	if err != nil {
		return err
	}
	defer store.Close()
	rdb, _, err := redisconn.Open(cfg.RedisURL)
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	defer func() { _ = rdb.Close() }()
	redisconn.LogTo(log)
	log.Info("journal source", "redis", redactURL(cfg.RedisURL))

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	c, err := consumer.New(consumer.Config{Redis: rdb, Store: store, Name: j.Consumer,
		Batch: j.Batch, Metrics: consumer.NewMetrics(reg), Logger: log})
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeHTTPJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		rctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := c.Ready(rctx, j.MaxLag); err != nil {
			writeHTTPJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": err.Error()})
			return
		}
		writeHTTPJSON(w, http.StatusOK, map[string]any{"ready": true})
	})
	ln, err := net.Listen("tcp", j.Listen)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	log.Info("flashgate journal listening", "addr", ln.Addr().String(), "group", consumer.Group,
		"max_lag", j.MaxLag, "batch", j.Batch)

	runErr := c.Run(ctx)
	log.Info("shutdown: consumer stopped; closing the HTTP listener")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return runErr
}

func writeHTTPJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
