// Package redistest gives tests a real Redis: the server named by REDIS_URL,
// or a throwaway redis-server started on a free loopback port.
//
// Tests never flush a shared server; they isolate themselves with unique room
// ids (see Room). A missing redis-server binary fails the test with an
// instruction — it never skips — because every Redis test must really run.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server process started by Start.
type Server struct {
	Addr string
	Port int
	Dir  string
	cmd  *exec.Cmd
	args []string
	mu   sync.Mutex
}

// Start launches redis-server on a free loopback port with extra config
// arguments (e.g. "--cluster-enabled", "yes") and stops it at test cleanup.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server not found: install it (apt-get install redis-server) or run `make test`, which does")
	}
	s, err := Launch(t.TempDir(), extra...)
	if err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(s.Kill)
	return s
}

// Launch starts redis-server with its files in dir, for callers without a
// testing.TB (TestMain); they must Kill it.
func Launch(dir string, extra ...string) (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), Port: port, Dir: dir}
	s.args = append([]string{
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--protected-mode", "yes", "--loglevel", "warning",
	}, extra...)
	if err := s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd := exec.Command("redis-server", s.args...)
	cmd.Dir = s.Dir
	logf, err := os.Create(filepath.Join(s.Dir, "redis.log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd = cmd
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", s.Addr, 100*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	return fmt.Errorf("redis-server on %s did not come up: %s", s.Addr, log)
}

// Kill stops the server with SIGKILL (what a crash looks like) and waits for it.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// Restart starts the server again on the same port after Kill (data is lost:
// persistence is off).
func (s *Server) Restart() error { return s.start() }

// Client returns a go-redis client for the server, closed at cleanup.
func (s *Server) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Client returns a client for REDIS_URL when it is set, otherwise for a fresh
// redis-server started for this test.
//
// Tests that inject a clock (issuer.Config.Now) must use Start instead: on a
// shared server, another test's tick loop (issuer.Run, Redis TIME) ticks
// every registered room, and the room's monotonic clock would then jump to
// the real time.
func Client(t testing.TB) *redis.Client {
	t.Helper()
	if u := os.Getenv("REDIS_URL"); u != "" {
		opt, err := redis.ParseURL(u)
		if err != nil {
			t.Fatalf("REDIS_URL: %v", err)
		}
		c := redis.NewClient(opt)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("REDIS_URL %s: %v", u, err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	return Start(t).Client(t)
}

// Room returns a unique room id with the given prefix, so tests sharing one
// Redis never see each other's keys.
func Room(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

func itoa(n int) string { return strconv.Itoa(n) }

// FreePort asks the kernel for a free loopback TCP port.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
