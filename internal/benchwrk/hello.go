package main

import (
	"errors"
	"os"
	"os/signal"
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
// answers 503 (wrk counts it as non-2xx). The fiber.Config is like
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

// helloJSON is the answer of GET /hello and /ping.
var helloJSON = fiber.Map{"room": "r", "state": "WAITING", "position": 42}

// helloApp is serveHello's fiber app: GET /hello, and GET /ping through rdb.
func helloApp(rdb *redis.Client) *fiber.App {
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
	return app
}
