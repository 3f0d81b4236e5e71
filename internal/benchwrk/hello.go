package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gofiber/fiber/v2"
)

// serveHello is the `hello ADDR` subcommand: the bare fiber server every
// ratio is compared with. GET /hello answers a small JSON object through
// c.JSON, from a fiber.Config like server/server.go's (the same options that
// touch the request path: UnescapePath, the read and idle timeouts; no
// middleware). It runs until SIGTERM or SIGINT. Errors: the listener's.
func serveHello(addr string) error {
	app := fiber.New(fiber.Config{
		AppName:               "flashgate-bench-hello",
		DisableStartupMessage: true,
		UnescapePath:          true,
		ReadTimeout:           5 * time.Second, // server.Options.HeaderTimeout's default
		IdleTimeout:           75 * time.Second,
	})
	app.Get("/hello", func(c *fiber.Ctx) error {
		return c.JSON(fiber.Map{"room": "r", "state": "WAITING", "position": 42})
	})
	go func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
		<-ch
		_ = app.Shutdown()
	}()
	return app.Listen(addr)
}
