package issuer_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
	port := 20000 + os.Getpid()%20000
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "redis-server is required (apt-get install redis-server, or run make test):", err)
		os.Exit(2)
	}
	exampleRedis = "127.0.0.1:" + strconv.Itoa(port)
	time.Sleep(200 * time.Millisecond)
	code := m.Run()
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	os.Exit(code)
}
