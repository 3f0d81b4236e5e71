package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"
)

// serveHello is the `hello ADDR` subcommand: the bare fiber server every
// ratio is compared with, and the physical limit of the rows that need Redis.
// GET /hello answers a small JSON object through c.JSON; GET /ping first
// sends one PING to REDIS_URL (one go-redis v9 client with its defaults,
// created at start: the pool flashgate serve would have before its own
// tuning) and then answers the same JSON — the least a request that needs one
// Redis round trip (every exact status, every enter) can cost. A failed PING
// answers 503 (wrk counts it as non-2xx).
//
// POST /batched and POST /batched-enter are the limits of flashgate's
// batched rows: like flashgate's enter they read the user from the
// X-User-ID header (400 without one; a copy of it is what joins the batch),
// and concurrent requests share one Redis call through a leader-handoff
// group commit (groupCommit, issuer/batch.go's scheme, up to maxBatch
// users per call), then answer the same JSON. /batched sends one PING per
// batch: the least a batched request can cost. /batched-enter runs
// batchedEnterScript (EVALSHA) per batch: the least Redis work an enter
// does (the arrival counter, the line's ZSET, one journal entry per user);
// its keys (benchEnterKeys) are never reset by the server — benchwrk's
// FLUSHALL before each run does. A failed Redis call answers 503 to every
// request of its batch. The fiber.Config is like
// server/server.go's (the options that touch the request path: UnescapePath,
// the read and idle timeouts; no middleware). It runs until SIGTERM or
// SIGINT. Errors: REDIS_URL unset or unparsable, the listener's.
func serveHello(addr string) error {
	url := os.Getenv("REDIS_URL")
	if url == "" {
		return errors.New("REDIS_URL is not set (GET /ping needs it)")
	}
	ropts, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	app := helloApp(rdb)
	go func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
		<-ch
		_ = app.Shutdown()
	}()
	return app.Listen(addr)
}

// helloJSON is the answer of GET /hello, /ping and POST /batched, /batched-enter.
var helloJSON = fiber.Map{"room": "r", "state": "WAITING", "position": 42}

// helloApp is serveHello's fiber app: GET /hello, GET /ping, POST /batched
// and /batched-enter through rdb.
func helloApp(rdb *redis.Client) *fiber.App {
	app, _ := helloRoutes(rdb)
	return app
}

// helloBatchers are the batchers of helloApp's batched routes (tests count
// their calls and wrap their sends).
type helloBatchers struct {
	ping, enter *groupCommit
}

// helloRoutes is helloApp, with its batchers.
func helloRoutes(rdb *redis.Client) (*fiber.App, *helloBatchers) {
	bs := &helloBatchers{
		ping: &groupCommit{send: func([]string) error {
			return rdb.Ping(context.Background()).Err()
		}},
		enter: &groupCommit{send: func(users []string) error {
			return runBatchedEnter(context.Background(), rdb, users)
		}},
	}
	app := fiber.New(fiber.Config{
		AppName:               "flashgate-bench-hello",
		DisableStartupMessage: true,
		UnescapePath:          true,
		ReadTimeout:           5 * time.Second, // server.Options.HeaderTimeout's default
		IdleTimeout:           75 * time.Second,
	})
	app.Get("/hello", func(c *fiber.Ctx) error {
		return c.JSON(helloJSON)
	})
	app.Get("/ping", func(c *fiber.Ctx) error {
		if err := rdb.Ping(c.UserContext()).Err(); err != nil {
			return c.Status(fiber.StatusServiceUnavailable).SendString(err.Error())
		}
		return c.JSON(helloJSON)
	})
	batched := func(g *groupCommit) fiber.Handler {
		return func(c *fiber.Ctx) error {
			user := c.Get("X-User-ID")
			if user == "" {
				return c.Status(fiber.StatusBadRequest).SendString("X-User-ID is required")
			}
			// c.Get aliases fasthttp's buffer, reused after the handler
			// returns; the batch may outlive it (invariant 7).
			if err := g.do(strings.Clone(user)); err != nil {
				return c.Status(fiber.StatusServiceUnavailable).SendString(err.Error())
			}
			return c.JSON(helloJSON)
		}
	}
	app.Post("/batched", batched(bs.ping))
	app.Post("/batched-enter", batched(bs.enter))
	return app, bs
}

// benchEnterKeys are batchedEnterScript's KEYS: the arrival counter, the
// line (ZSET user → arrival number) and the journal stream, in one hash slot
// ({bench}) like a room's keys.
var benchEnterKeys = []string{"bench:{bench}:seq", "bench:{bench}:line", "bench:{bench}:journal"}

// benchJournalMaxLen is the journal stream's XADD MAXLEN ~ bound:
// issuer/lua/prelude.lua's default journal_maxlen (1,000,000).
const benchJournalMaxLen = "1000000"

// batchedEnterScript does for a batch of users (ARGV[3…]) the least Redis
// work flashgate's enter script does for them (issuer/lua/enter.lua): one
// INCRBY of the arrival counter (KEYS[1]) by the batch size, one ZADD of
// every user into the line (KEYS[2]) scored by its arrival number (in
// chunks of 3,000 users: Lua 5.1's unpack stops at 8,000 values), and one
// XADD to the journal (KEYS[3]) per 256 users, MAXLEN ~ ARGV[1]: a batch
// entry of prelude.lua's journal_flush (kind 'batch', epoch, events: per
// user the line "entered,<seq>,<user>,public,<at>,,," of journal_entry, at
// = ARGV[2] in ms). No reads, no checks, no token: flashgate's enter does
// all this and more. Returns the counter after the batch.
var batchedEnterScript = redis.NewScript(`
local n = #ARGV - 2
local last = redis.call('INCRBY', KEYS[1], n)
local first = last - n
local chunk = 3000
for from = 1, n, chunk do
  local z = {}
  for i = from, math.min(n, from + chunk - 1) do
    z[#z + 1] = first + i
    z[#z + 1] = ARGV[i + 2]
  end
  redis.call('ZADD', KEYS[2], unpack(z))
end
for from = 1, n, 256 do
  local ev = {}
  for i = from, math.min(n, from + 255) do
    ev[#ev + 1] = 'entered,' .. string.format('%d', first + i) .. ',' .. ARGV[i + 2] .. ',public,' .. ARGV[2] .. ',,,'
  end
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[1], '*', 'kind', 'batch', 'epoch', 'bench',
    'events', table.concat(ev, '\n'))
end
return last
`)

// runBatchedEnter runs batchedEnterScript for users (≥ 1) at the current
// time. Errors: Redis's.
func runBatchedEnter(ctx context.Context, rdb *redis.Client, users []string) error {
	args := make([]any, 0, len(users)+2)
	args = append(args, benchJournalMaxLen, strconv.FormatInt(time.Now().UnixMilli(), 10))
	for _, u := range users {
		args = append(args, u)
	}
	return batchedEnterScript.Run(ctx, rdb, benchEnterKeys, args...).Err()
}
