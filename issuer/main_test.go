package issuer_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/testing/redistest"
)

// exampleRedis is the address Example functions use: REDIS_URL's, or a
// redis-server started for this package's tests.
var exampleRedis string

// silent drops go-redis's internal log lines (dial retries while a test
// has killed a server on purpose).
type silent struct{}

func (silent) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(silent{})
	if u := os.Getenv("REDIS_URL"); u != "" {
		opt, err := redis.ParseURL(u)
		if err != nil {
			fmt.Fprintln(os.Stderr, "REDIS_URL:", err)
			os.Exit(2)
		}
		exampleRedis = opt.Addr
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "flashgate-issuer-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	srv, err := redistest.Launch(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "redis-server is required (apt-get install redis-server, or run make test):", err)
		os.Exit(2)
	}
	exampleRedis = srv.Addr
	code := m.Run()
	srv.Kill()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
