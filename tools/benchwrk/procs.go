package main

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

//go:embed lua/*.lua
var luaScripts embed.FS

// procSet holds the processes the driver started, to stop them on exit and
// on Ctrl-C.
type procSet struct {
	mu    sync.Mutex
	procs map[*exec.Cmd]bool
}

func (p *procSet) add(c *exec.Cmd) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.procs == nil {
		p.procs = map[*exec.Cmd]bool{}
	}
	p.procs[c] = true
}

// stop sends c SIGTERM, waits up to 5 s for it to exit, then kills it.
func (p *procSet) stop(c *exec.Cmd, done <-chan struct{}) {
	_ = c.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = c.Process.Kill()
		<-done
	}
	p.mu.Lock()
	delete(p.procs, c)
	p.mu.Unlock()
}

// killAll kills every process still running (the deferred cleanup).
func (p *procSet) killAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.procs {
		_ = c.Process.Kill()
	}
	p.procs = nil
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// server is a started process (flashgate serve or the bare hello server).
type server struct {
	cmd   *exec.Cmd
	done  chan struct{}
	base  string // http://127.0.0.1:port
	pprof string // FLASHGATE_PPROF_ADDR (serve only)
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// start starts spec's server and waits until it answers (serve: /readyz
// 200; hello: /hello 200), at most 30 s. The hello server gets the
// driver's REDIS_URL (for GET /ping). Errors: the start's, a process
// that exits or never answers.
func (b *bencher) start(ctx context.Context, spec rowSpec) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	s := &server{base: "http://" + addr, done: make(chan struct{})}
	probe := s.base + "/readyz"
	if spec.hello {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		s.cmd = exec.Command(self, "hello", addr)
		s.cmd.Env = append(os.Environ(), "REDIS_URL="+b.o.redisURL) // the last one wins
		probe = s.base + "/hello"
	} else {
		if s.pprof, err = freeAddr(); err != nil {
			return nil, err
		}
		s.cmd = exec.Command(b.o.bin, "serve")
		s.cmd.Env = b.serveEnv(addr, s.pprof, spec)
	}
	s.cmd.Dir = b.dir
	if b.o.serverLog != "" {
		f, err := os.OpenFile(b.o.serverLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		s.cmd.Stdout, s.cmd.Stderr = f, f
	} // else: /dev/null (os/exec's nil)
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	b.procs.add(s.cmd)
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(probe)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("%s exited: %v (rerun with -server-log FILE to see why)", filepath.Base(s.cmd.Path), s.cmd.ProcessState)
		case <-ctx.Done():
			b.procs.stop(s.cmd, s.done)
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.procs.stop(s.cmd, s.done)
			return nil, errors.New("no answer from " + probe + " within 30 s")
		}
	}
}

// stopServer stops s (SIGTERM, then SIGKILL after 5 s).
func (b *bencher) stopServer(s *server) { b.procs.stop(s.cmd, s.done) }

// serveEnv is flashgate serve's environment: the driver's, without any
// FLASHGATE_* or REDIS_URL of its own, plus the bench settings (docs/configuration.md): the rate limits off (a load generator is one client), an admin token, a fixed
// waiting secret (Redis is flushed between runs), the key ring in the temp
// dir, spec's journal bound and status snapshot ("" keeps the default), the
// access log, pprof.
func (b *bencher) serveEnv(addr, pprof string, spec rowSpec) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLASHGATE_") && !strings.HasPrefix(kv, "REDIS_URL=") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"REDIS_URL="+b.o.redisURL,
		"FLASHGATE_ADDR="+addr,
		"FLASHGATE_KEYS_FILE="+filepath.Join(b.dir, "keys.json"),
		"FLASHGATE_ADMIN_TOKEN="+b.admin,
		"FLASHGATE_WAITING_SECRET="+b.secret,
		"FLASHGATE_ENTER_PER_USER=0",
		"FLASHGATE_ENTER_PER_ADDRESS=0",
		"FLASHGATE_STATUS_PER_USER=0",
		"FLASHGATE_EXCHANGE_PER_USER=0",
		"FLASHGATE_LEAVE_PER_USER=0",
		"FLASHGATE_COMPLETE_PER_USER=0",
		fmt.Sprintf("FLASHGATE_ACCESS_LOG=%v", b.o.accessLog),
		"FLASHGATE_PPROF_ADDR="+pprof,
	)
	if spec.journal != "" {
		env = append(env, "FLASHGATE_JOURNAL_MAXLEN="+spec.journal)
	}
	if spec.snapshot != "" {
		env = append(env, "FLASHGATE_STATUS_SNAPSHOT="+spec.snapshot)
	}
	return env
}

// writeScripts copies the embedded wrk Lua scripts into the temp dir.
func (b *bencher) writeScripts() error {
	for _, n := range []string{"enter.lua", "pairs.lua"} {
		data, err := luaScripts.ReadFile("lua/" + n)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(b.dir, n), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
