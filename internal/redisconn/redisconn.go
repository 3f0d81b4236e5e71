// Package redisconn opens the Redis topology named by a URL (REDIS_URL):
//
//	redis://[user:pass@]host:port[/db][?opts]       standalone (rediss:// for TLS, unix:// sockets)
//	redis+sentinel://[user:pass@]host:port[/db]?master_name=M[&addr=host2:port…]
//	                                                Sentinel: the failover client follows the
//	                                                promoted master (rediss+sentinel:// for TLS)
//	redis+cluster://[user:pass@]host:port[?addr=host2:port…]
//	                                                Redis Cluster (rediss+cluster:// for TLS)
//
// Query options are go-redis's (ParseURL, ParseFailoverURL, ParseClusterURL):
// dial_timeout, read_timeout, pool_size, max_retries, … Every returned
// client satisfies issuer.Redis.
package redisconn

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Mode names a Redis topology.
type Mode string

// The topologies Open understands.
const (
	Standalone Mode = "standalone"
	Sentinel   Mode = "sentinel"
	Cluster    Mode = "cluster"
)

// Open returns a client for rawURL and the topology it selected. Errors
// name the URL form expected; the URL's password is never echoed. Every
// client honours its callers' context deadlines (go-redis
// ContextTimeoutEnabled), so a request budget (server.Options.RedisTimeout)
// bounds a command even against a Redis that accepts and never answers.
func Open(rawURL string) (redis.UniversalClient, Mode, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, "", fmt.Errorf("redis URL must look like redis://host:port/0, redis+sentinel://… or redis+cluster://…")
	}
	base, topo, _ := strings.Cut(scheme, "+")
	switch {
	case topo == "" && (base == "redis" || base == "rediss" || base == "unix"):
		o, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, "", fmt.Errorf("redis URL: %w", redact(err, rawURL))
		}
		o.ContextTimeoutEnabled = true
		return redis.NewClient(o), Standalone, nil
	case topo == "sentinel" && (base == "redis" || base == "rediss"):
		o, err := redis.ParseFailoverURL(base + "://" + rest)
		if err != nil {
			return nil, "", fmt.Errorf("redis+sentinel URL: %w", redact(err, rawURL))
		}
		if o.MasterName == "" {
			return nil, "", fmt.Errorf("redis+sentinel URL needs ?master_name=<name>")
		}
		o.ContextTimeoutEnabled = true
		return redis.NewFailoverClient(o), Sentinel, nil
	case topo == "cluster" && (base == "redis" || base == "rediss"):
		o, err := redis.ParseClusterURL(base + "://" + rest)
		if err != nil {
			return nil, "", fmt.Errorf("redis+cluster URL: %w", redact(err, rawURL))
		}
		o.ContextTimeoutEnabled = true
		return redis.NewClusterClient(o), Cluster, nil
	}
	return nil, "", fmt.Errorf("unsupported redis URL scheme %q: use redis, rediss, unix, redis+sentinel or redis+cluster", scheme)
}

// redact keeps a password that go-redis may quote out of error messages.
func redact(err error, rawURL string) error {
	msg := err.Error()
	if i := strings.Index(rawURL, "@"); i > 0 {
		if j := strings.Index(rawURL, "://"); j >= 0 && j+3 < i {
			if _, pass, ok := strings.Cut(rawURL[j+3:i], ":"); ok && pass != "" {
				msg = strings.ReplaceAll(msg, pass, "***")
			}
		}
	}
	return fmt.Errorf("%s", msg)
}

// LogTo sends go-redis's own log lines (process-wide: one per failed dial,
// several a second while Redis is down) to log at debug level; the Breaker
// reports outages in two lines.
func LogTo(log *slog.Logger) { redis.SetLogger(debugLog{log}) }

type debugLog struct{ log *slog.Logger }

func (l debugLog) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	if l.log.Enabled(ctx, slog.LevelDebug) {
		l.log.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
	}
}
