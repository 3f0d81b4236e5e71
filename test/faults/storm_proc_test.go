package faults_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// This file runs the storm's issuer replicas as real processes: the
// flashgate binary, built once per TestStorm, started as `flashgate serve`
// with its configuration in the environment, SIGKILLed and restarted by the
// replica-kill scenario.

// buildFlashgate builds cmd/flashgate (without -race: the replicas are the
// system under test, not the race detector's) into dir and returns its path.
func buildFlashgate(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the storm builds the flashgate binary and needs the go command in PATH: %v", err)
	}
	bin := filepath.Join(dir, "flashgate")
	cmd := exec.Command(goBin, "build", "-o", bin, "github.com/flashgate/flashgate/cmd/flashgate")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build cmd/flashgate: %v\n%s", err, out.String())
	}
	t.Logf("built %s in %s", bin, time.Since(start).Round(time.Millisecond))
	return bin
}

// replica is one `flashgate serve` process on a fixed loopback port, so a
// restarted replica is found where the clients expect it.
type replica struct {
	name string
	bin  string
	env  []string
	addr string
	log  string // stdout and stderr, appended across restarts

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

func (r *replica) base() string { return "http://" + r.addr }

// start launches the process and waits until /healthz answers.
func (r *replica) start() error {
	logf, err := os.OpenFile(r.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(r.bin, "serve")
	cmd.Env = r.env
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	r.mu.Lock()
	r.cmd, r.exited = cmd, exited
	r.mu.Unlock()

	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("%s exited during start:\n%s", r.name, r.tail(20))
		default:
		}
		if res, err := hc.Get(r.base() + "/healthz"); err == nil {
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.kill()
	return fmt.Errorf("%s did not answer /healthz within 20 s:\n%s", r.name, r.tail(20))
}

// take hands over the running process (nil if none) to the one stopping it.
func (r *replica) take() (*exec.Cmd, chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cmd, exited := r.cmd, r.exited
	r.cmd = nil
	return cmd, exited
}

// kill SIGKILLs the process (a crash) and waits for it.
func (r *replica) kill() {
	cmd, exited := r.take()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// stop shuts the process down gracefully (SIGTERM), SIGKILL after 5 s.
func (r *replica) stop() {
	cmd, exited := r.take()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// tail returns the last n lines of the replica's log.
func (r *replica) tail(n int) string {
	b, _ := os.ReadFile(r.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// errorLines returns how many lines of the replica's log are at level ERROR
// (text format: "level=ERROR"), and up to max of them.
func (r *replica) errorLines(max int) (int, []string) {
	b, _ := os.ReadFile(r.log)
	n := 0
	var ex []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "level=ERROR") {
			n++
			if len(ex) < max {
				ex = append(ex, r.name+": "+clipString(l, 400))
			}
		}
	}
	return n, ex
}

// redisPID asks the server for its process id (INFO server), so the storm
// can SIGSTOP and SIGCONT it without a handle on the process.
func redisPID(ctx context.Context, rdb *redis.Client) (int, error) {
	s, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server has no process_id")
}

// redisInt returns one integer field of an INFO section (e.g. "memory",
// "used_memory").
func redisInt(ctx context.Context, rdb *redis.Client, section, field string) (int64, error) {
	s, err := rdb.Info(ctx, section).Result()
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), field+":"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO %s has no %s", section, field)
}

func clipString(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
