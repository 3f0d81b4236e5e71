// Package pgtest gives tests a real PostgreSQL: a throwaway cluster made with
// initdb in a temporary directory and started with pg_ctl on a free loopback
// port, with one fresh database per test.
//
// Finding the binaries: $FLASHGATE_PG_BIN, else the newest
// /usr/lib/postgresql/<major>/bin (Debian keeps initdb, pg_ctl and postgres
// there, off PATH), else PATH. `make test` installs Debian's postgresql
// package through scripts/ensure-postgres.sh and sets FLASHGATE_PG_BIN. A
// missing binary fails the test with an instruction; it never skips.
//
// Running as root: initdb, pg_ctl and postgres refuse to run as root, so when
// the test process is root (uid 0) the cluster's processes run as the
// unprivileged user "nobody" (through exec's credential switch, no sudo) and
// the cluster directory is a private temporary directory owned by that user
// (t.TempDir() is root-only 0700, which nobody could not enter), made in
// $TMPDIR (default /tmp), which nobody must be able to enter. Otherwise they
// run as the test process's own user.
//
// Speed: initdb costs about a second, a database a few milliseconds. Share
// one cluster per test binary with Shared and stop it in TestMain with Main:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestX(t *testing.T) { dsn := pgtest.Shared(t).NewDatabase(t) … }
//
// The cluster is tuned for tests, not durability: fsync=off,
// synchronous_commit=off, full_page_writes=off, trust authentication on
// 127.0.0.1 and on a unix socket in the cluster directory.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// StartTimeout bounds `pg_ctl start -w` (seconds): a cluster not accepting
// connections by then fails the test with the server log.
const StartTimeout = 10

// Server is a running throwaway PostgreSQL cluster.
type Server struct {
	// DSN connects to the "postgres" database as the superuser "postgres":
	// postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable.
	DSN string
	// Port is the TCP port on 127.0.0.1.
	Port int
	// Dir holds data/ (the cluster), sock/ (its unix socket) and postgres.log.
	Dir string

	bin     string
	cred    *syscall.Credential // nil: run as ourselves
	once    sync.Once
	stopped atomic.Bool
}

// Start initialises and starts a cluster of its own for t and stops it
// (pg_ctl stop -m immediate) and removes its files at t's cleanup. Prefer
// Shared, which pays initdb once per test binary.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := Launch()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

var shared struct {
	once sync.Once
	srv  *Server
	err  error
}

// Shared returns the test binary's one cluster, started by the first call;
// stop it with Main in TestMain. A failed start fails every caller with the
// same error.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() { shared.srv, shared.err = Launch() })
	if shared.err != nil {
		t.Fatalf("pgtest: %v", shared.err)
	}
	return shared.srv
}

// Main runs the tests, stops the shared cluster if one was started, and exits
// with the tests' code. Call it as the whole of TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if shared.srv != nil {
		shared.srv.Stop()
	}
	os.Exit(code)
}

// Launch initialises and starts a cluster for callers without a testing.TB;
// they must Stop it. Errors name the failing step and carry its output (for
// a failed start, the server log).
func Launch() (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			return nil, fmt.Errorf("running as root, and initdb refuses root: no user \"nobody\" to run it as: %w", err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	if s.Dir, err = os.MkdirTemp("", "flashgate-pg-"); err != nil {
		return nil, err
	}
	if err := s.own(s.Dir); err != nil {
		s.removeDir()
		return nil, err
	}
	data := filepath.Join(s.Dir, "data")
	sock := filepath.Join(s.Dir, "sock")
	if err := os.Mkdir(sock, 0o700); err != nil {
		s.removeDir()
		return nil, err
	}
	if err := s.own(sock); err != nil {
		s.removeDir()
		return nil, err
	}
	if out, err := s.run("initdb", "-D", data, "--auth=trust", "-U", "postgres",
		"--no-sync", "--encoding=UTF8", "--locale=C"); err != nil {
		s.removeDir()
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	logPath := filepath.Join(s.Dir, "postgres.log")
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a free port can be taken before postgres binds it
		port, err := freePort()
		if err != nil {
			s.removeDir()
			return nil, err
		}
		opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off "+
			"-c synchronous_commit=off -c full_page_writes=off -c max_connections=200", port, sock)
		out, err := s.run("pg_ctl", "start", "-w", "-t", strconv.Itoa(StartTimeout),
			"-D", data, "-l", logPath, "-o", opts)
		if err == nil {
			s.Port = port
			s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
			return s, nil
		}
		log, _ := os.ReadFile(logPath)
		lastErr = fmt.Errorf("pg_ctl start on port %d (timeout %ds): %v\n%s\nserver log:\n%s",
			port, StartTimeout, err, out, log)
		_, _ = s.run("pg_ctl", "stop", "-D", data, "-m", "immediate")
	}
	s.removeDir()
	return nil, lastErr
}

// Stop stops the cluster (pg_ctl stop -m immediate: no checkpoint, the data
// is thrown away) and removes its directory. Idempotent.
func (s *Server) Stop() {
	s.once.Do(func() {
		s.stopped.Store(true)
		_, _ = s.run("pg_ctl", "stop", "-D", filepath.Join(s.Dir, "data"), "-m", "immediate", "-w")
		s.removeDir()
	})
}

// NewDatabase creates an empty database with a unique name (derived from
// t.Name()) and returns its DSN; it is dropped (WITH (FORCE)) at t's cleanup,
// so close pools opened on it in cleanups registered after this call (they
// run first). A database of a cluster already stopped is left to the
// cluster's removal.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := dbName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN)
	if err != nil {
		t.Fatalf("pgtest: connect %s: %v", s.DSN, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if s.stopped.Load() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, s.DSN)
		if err != nil {
			t.Errorf("pgtest: connect to drop %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, name)
}

var nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)

// dbName is "t_" + the lower-cased test name with other characters folded to
// "_", cut to fit PostgreSQL's 63-byte identifiers with a random suffix.
func dbName(test string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	base := nonIdent.ReplaceAllString(strings.ToLower(test), "_")
	if len(base) > 48 {
		base = base[:48]
	}
	return "t_" + base + "_" + hex.EncodeToString(b)
}

// BinDir finds the directory holding initdb, pg_ctl and postgres (see the
// package doc for the order) or says how to install them.
func BinDir() (string, error) {
	has := func(dir string) bool {
		for _, b := range []string{"initdb", "pg_ctl", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if d := os.Getenv("FLASHGATE_PG_BIN"); d != "" {
		if has(d) {
			return d, nil
		}
		return "", fmt.Errorf("FLASHGATE_PG_BIN=%s does not hold initdb, pg_ctl and postgres", d)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && has(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", errors.New("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found: " +
		"run `make test` (it installs them) or scripts/ensure-postgres.sh as root, or apt-get install postgresql")
}

func majorOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// run runs a PostgreSQL binary from s.bin as the cluster's user and returns
// its combined output.
func (s *Server) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	// pg_ctl's postmaster keeps its stdout/stderr (-l redirects the log), so
	// collect output through a file, not a pipe: a pipe would never close.
	f, err := os.CreateTemp("", "flashgate-pg-out-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	err = cmd.Run()
	out, _ := os.ReadFile(f.Name())
	return out, err
}

// own hands dir to the cluster's user when running as root.
func (s *Server) own(dir string) error {
	if s.cred == nil {
		return nil
	}
	return os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid))
}

func (s *Server) removeDir() { _ = os.RemoveAll(s.Dir) }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
