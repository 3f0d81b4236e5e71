package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/verifier"
)

type result struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return result{code, out.String(), errb.String()}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"frobnicate"}} {
		r := runCLI(t, "", args...)
		assert.Equal(t, exitUsage, r.code, "%v", args)
		assert.Contains(t, r.stderr, "Usage:")
		assert.Empty(t, r.stdout)
	}
	r := runCLI(t, "", "version")
	assert.Equal(t, exitOK, r.code)
	assert.True(t, strings.HasPrefix(r.stdout, "flashgate "))
}

func TestServeHelpListsEveryVariable(t *testing.T) {
	r := runCLI(t, "", "serve", "-h")
	assert.Equal(t, exitOK, r.code)
	for _, v := range []string{"REDIS_URL", "FLASHGATE_ADDR", "FLASHGATE_KEYS_FILE", "FLASHGATE_ISSUER",
		"FLASHGATE_AUDIENCE", "FLASHGATE_ADMIN_TOKEN", "FLASHGATE_USER_HEADER", "FLASHGATE_WAITING_SECRET",
		"FLASHGATE_DEFAULT_ROOM", "FLASHGATE_DEFAULT_CAPACITY", "FLASHGATE_DEFAULT_RATE_PER_MINUTE",
		"FLASHGATE_DEFAULT_SESSION", "FLASHGATE_DEFAULT_TICK", "FLASHGATE_DEFAULT_ARRIVAL_WINDOW", "FLASHGATE_DEFAULT_PREQUEUE", "FLASHGATE_SHUTDOWN_TIMEOUT",
		"FLASHGATE_LOG_LEVEL", "FLASHGATE_LOG_FORMAT"} {
		assert.Contains(t, r.stdout, v)
	}
	assert.Contains(t, r.stdout, "127.0.0.1:8080")
}

func TestServeConfigDefaultsAndValidation(t *testing.T) {
	c, err := loadServeEnv(map[string]string{})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:8080", c.Serve.Addr)
	assert.Equal(t, "flashgate-keys.json", c.Serve.KeysFile)
	assert.Equal(t, "off", c.Serve.DefaultRoom)
	assert.Nil(t, c.Serve.defaultRoom())
	assert.Equal(t, 15*time.Second, c.Serve.ShutdownTimeout)
	assert.Equal(t, 32, c.Serve.ScriptBatch)
	assert.Empty(t, c.Serve.deprecations())
	// FLASHGATE_ENTER_BATCH is FLASHGATE_SCRIPT_BATCH's deprecated alias:
	// read when the new name is unset, with a warning; both must agree.
	c, err = loadServeEnv(map[string]string{"FLASHGATE_ENTER_BATCH": "4"})
	require.NoError(t, err)
	assert.Equal(t, 4, c.Serve.ScriptBatch)
	assert.Equal(t, 4, c.Serve.issuerConfig().ScriptBatch)
	assert.Equal(t, []string{"FLASHGATE_ENTER_BATCH is deprecated and will be removed: set FLASHGATE_SCRIPT_BATCH"}, c.Serve.deprecations())
	c, err = loadServeEnv(map[string]string{"FLASHGATE_SCRIPT_BATCH": "5"})
	require.NoError(t, err)
	assert.Equal(t, 5, c.Serve.issuerConfig().ScriptBatch)
	assert.Empty(t, c.Serve.deprecations())
	c, err = loadServeEnv(map[string]string{"FLASHGATE_SCRIPT_BATCH": "5", "FLASHGATE_ENTER_BATCH": "5"})
	require.NoError(t, err)
	assert.Equal(t, 5, c.Serve.ScriptBatch)

	c, err = loadServeEnv(map[string]string{"FLASHGATE_DEFAULT_ROOM": "paused", "FLASHGATE_DEFAULT_CAPACITY": "7"})
	require.NoError(t, err)
	require.NotNil(t, c.Serve.defaultRoom())
	assert.Equal(t, 7, c.Serve.defaultRoom().Capacity)
	assert.Equal(t, issuer.DefaultArrivalWindow, c.Serve.defaultRoom().ArrivalWindow)
	c, err = loadServeEnv(map[string]string{"FLASHGATE_DEFAULT_ROOM": "open", "FLASHGATE_DEFAULT_ARRIVAL_WINDOW": "0"})
	require.NoError(t, err)
	assert.Equal(t, issuer.ArrivalWindowOff, c.Serve.defaultRoom().ArrivalWindow, "0: off")
	c, err = loadServeEnv(map[string]string{"FLASHGATE_DEFAULT_ROOM": "open", "FLASHGATE_DEFAULT_ARRIVAL_WINDOW": "90s"})
	require.NoError(t, err)
	assert.Equal(t, 90*time.Second, c.Serve.defaultRoom().ArrivalWindow)
	assert.Equal(t, issuer.PreQueueFIFO, c.Serve.defaultRoom().PreQueue)
	c, err = loadServeEnv(map[string]string{"FLASHGATE_DEFAULT_ROOM": "open", "FLASHGATE_DEFAULT_PREQUEUE": "shuffle"})
	require.NoError(t, err)
	assert.Equal(t, issuer.PreQueueShuffle, c.Serve.defaultRoom().PreQueue)

	for name, env := range map[string]map[string]string{
		"bad default room":   {"FLASHGATE_DEFAULT_ROOM": "maybe"},
		"short secret":       {"FLASHGATE_WAITING_SECRET": "c2hvcnQ="},
		"secret not b64":     {"FLASHGATE_WAITING_SECRET": "!!!"},
		"bad log format":     {"FLASHGATE_LOG_FORMAT": "xml"},
		"bad log level":      {"FLASHGATE_LOG_LEVEL": "loud"},
		"negative flush":     {"FLASHGATE_LOG_FLUSH": "-1s"},
		"bad duration":       {"FLASHGATE_SHUTDOWN_TIMEOUT": "soon"},
		"bad session":        {"FLASHGATE_DEFAULT_ROOM": "open", "FLASHGATE_DEFAULT_SESSION": "1h"},
		"bad window":         {"FLASHGATE_DEFAULT_ROOM": "open", "FLASHGATE_DEFAULT_ARRIVAL_WINDOW": "10ms"},
		"bad prequeue":       {"FLASHGATE_DEFAULT_ROOM": "open", "FLASHGATE_DEFAULT_PREQUEUE": "random"},
		"enter batch 0":      {"FLASHGATE_ENTER_BATCH": "0"},
		"enter batch 1001":   {"FLASHGATE_ENTER_BATCH": "1001"},
		"script batch 0":     {"FLASHGATE_SCRIPT_BATCH": "0"},
		"script batch 1001":  {"FLASHGATE_SCRIPT_BATCH": "1001"},
		"batch names differ": {"FLASHGATE_SCRIPT_BATCH": "5", "FLASHGATE_ENTER_BATCH": "6"},
	} {
		_, err := loadServeEnv(env)
		assert.Error(t, err, name)
	}
	c, err = loadServeEnv(map[string]string{"FLASHGATE_WAITING_SECRET": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="})
	require.NoError(t, err)
	s, err := c.Serve.waitingSecret()
	require.NoError(t, err)
	assert.Len(t, s, 32)
}

func TestRedactURL(t *testing.T) {
	assert.Equal(t, "redis://u:xxxxx@h:1", redactURL("redis://u:secret@h:1"))
}

func TestKeysRoundTrip(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ring.json")

	r := runCLI(t, "", "keys", "list", "-file", file)
	assert.Equal(t, exitFailure, r.code, "no file yet")

	r = runCLI(t, "", "keys", "generate", "-file", file)
	require.Equal(t, exitOK, r.code, r.stderr)
	fi, err := os.Stat(file)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	ring, err := keys.Load(file)
	require.NoError(t, err)
	first := ring.ActiveKeyID()
	assert.Contains(t, r.stdout, first)

	r = runCLI(t, "", "keys", "generate", "-file", file)
	assert.Equal(t, exitFailure, r.code, "refuses to overwrite")
	assert.Contains(t, r.stderr, "-force")

	r = runCLI(t, "", "keys", "jwks", "-file", file)
	require.Equal(t, exitOK, r.code, r.stderr)
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &set))
	assert.Len(t, set.Keys, 2, "active + next")
	assert.NotContains(t, r.stdout, `"d"`)

	r = runCLI(t, "", "keys", "rotate", "-file", file, "-max-token-lifetime", "5m")
	require.Equal(t, exitOK, r.code, r.stderr)
	ring, err = keys.Load(file)
	require.NoError(t, err)
	assert.NotEqual(t, first, ring.ActiveKeyID())

	r = runCLI(t, "", "keys", "list", "-file", file, "-json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var infos []keys.KeyInfo
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &infos))
	statuses := map[keys.Status]int{}
	for _, k := range infos {
		statuses[k.Status]++
	}
	assert.Equal(t, map[keys.Status]int{keys.StatusActive: 1, keys.StatusNext: 1, keys.StatusRetired: 1}, statuses)

	r = runCLI(t, "", "keys", "list", "-file", file)
	require.Equal(t, exitOK, r.code)
	assert.Contains(t, r.stdout, first)
	assert.Contains(t, r.stdout, "retired")

	r = runCLI(t, "", "keys", "generate", "-file", file, "-force")
	require.Equal(t, exitOK, r.code, r.stderr)

	assert.Equal(t, exitUsage, runCLI(t, "", "keys").code)
	assert.Equal(t, exitUsage, runCLI(t, "", "keys", "burn").code)
	assert.Equal(t, exitUsage, runCLI(t, "", "keys", "list", "-file", file, "extra").code)
}

// signedToken returns a JWKS file and a token signed by its active key.
func signedToken(t *testing.T, claims map[string]any) (jwksFile, token string) {
	t.Helper()
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	doc, err := ring.PublicJWKS()
	require.NoError(t, err)
	jwksFile = filepath.Join(t.TempDir(), "jwks.json")
	require.NoError(t, os.WriteFile(jwksFile, doc, 0o644))
	payload, err := json.Marshal(claims)
	require.NoError(t, err)
	token, err = ring.Sign(payload)
	require.NoError(t, err)
	return jwksFile, token
}

func TestVerify(t *testing.T) {
	iat := time.Now().Unix()
	exp := iat + 300
	jwks, tok := signedToken(t, map[string]any{"iss": "flashgate", "aud": "orders", "sub": "alice",
		"product": "sneaker", "jti": "1.1.1", "iat": iat, "exp": exp})
	base := []string{"verify", "--jwks", jwks, "--issuer", "flashgate", "--audience", "orders", "--product", "sneaker"}
	decode := func(r result) verifyResult {
		t.Helper()
		var v verifyResult
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		require.Len(t, lines, 1, "one JSON line: %q", r.stdout)
		require.NoError(t, json.Unmarshal([]byte(lines[0]), &v))
		return v
	}

	t.Run("valid", func(t *testing.T) {
		r := runCLI(t, "", append(base, tok)...)
		require.Equal(t, exitOK, r.code, r.stderr)
		v := decode(r)
		assert.True(t, v.Valid)
		assert.Equal(t, "ok", v.Reason)
		assert.Equal(t, "alice", v.User)
		assert.Equal(t, "sneaker", v.Product)
		assert.Equal(t, "1.1.1", v.JTI)
		assert.Equal(t, exp, v.Exp)
	})
	t.Run("stdin and flags after the token", func(t *testing.T) {
		r := runCLI(t, tok+"\n", append(base, "-", "--user", "alice")...)
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.True(t, decode(r).Valid)
		r = runCLI(t, tok+"\n", base...)
		require.Equal(t, exitOK, r.code, r.stderr)
	})
	t.Run("expired", func(t *testing.T) {
		r := runCLI(t, "", append(base, "--now", strconv.FormatInt(exp, 10), tok)...)
		assert.Equal(t, exitFailure, r.code)
		v := decode(r)
		assert.False(t, v.Valid)
		assert.Equal(t, "expired", v.Reason)
		// Leeway keeps it alive a little longer.
		r = runCLI(t, "", append(base, "--now", strconv.FormatInt(exp, 10), "--leeway", "30s", tok)...)
		assert.Equal(t, exitOK, r.code)
	})
	t.Run("wrong user and product", func(t *testing.T) {
		r := runCLI(t, "", append(base, "--user", "bob", tok)...)
		assert.Equal(t, exitFailure, r.code)
		assert.Equal(t, "bad_user", decode(r).Reason)
		args := append([]string{}, base...)
		args[len(args)-1] = "boots"
		r = runCLI(t, "", append(args, tok)...)
		assert.Equal(t, exitFailure, r.code)
		assert.Equal(t, "bad_product", decode(r).Reason)
	})
	t.Run("tampered", func(t *testing.T) {
		parts := strings.Split(tok, ".")
		parts[1] = parts[1][:len(parts[1])-2] + "AA"
		r := runCLI(t, "", append(base, strings.Join(parts, "."))...)
		assert.Equal(t, exitFailure, r.code)
		assert.Contains(t, []string{"bad_signature", "malformed"}, decode(r).Reason)
		r = runCLI(t, "", append(base, "not-a-token")...)
		assert.Equal(t, exitFailure, r.code)
		assert.Equal(t, "malformed", decode(r).Reason)
	})
	t.Run("directives", func(t *testing.T) {
		// Issue 31 §3: a token of a stopped room (iat < its not_before) is
		// not valid, from a saved document or the issuer's URL.
		doc := func(nb int64) string {
			return fmt.Sprintf(`{"rooms":{"sneaker":{"not_before":%d},"boots":{"not_before":%d}}}`, nb, iat+3600)
		}
		file := filepath.Join(t.TempDir(), "directives.json")
		require.NoError(t, os.WriteFile(file, []byte(doc(iat+1)), 0o644))
		r := runCLI(t, "", append(base, "--directives", file, tok)...)
		assert.Equal(t, exitFailure, r.code, r.stderr)
		v := decode(r)
		assert.False(t, v.Valid)
		assert.Equal(t, "room_stopped", v.Reason)
		// Issued at the stop or after it: valid.
		require.NoError(t, os.WriteFile(file, []byte(doc(iat)), 0o644))
		r = runCLI(t, "", append(base, "--directives", file, tok)...)
		assert.Equal(t, exitOK, r.code, r.stdout)
		require.NoError(t, os.WriteFile(file, []byte(`{"rooms":{}}`), 0o644))
		assert.Equal(t, exitOK, runCLI(t, "", append(base, "--directives", file, tok)...).code)

		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/.well-known/flashgate-directives.json" {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "max-age=5")
			_, _ = io.WriteString(w, doc(iat+1))
		}))
		defer srv.Close()
		r = runCLI(t, "", append(base, "--directives", srv.URL+"/.well-known/flashgate-directives.json", tok)...)
		assert.Equal(t, exitFailure, r.code, r.stderr)
		assert.Equal(t, "room_stopped", decode(r).Reason)
		// Directives that cannot be fetched: not valid either (fail closed).
		r = runCLI(t, "", append(base, "--directives", srv.URL+"/down", tok)...)
		assert.Equal(t, exitFailure, r.code)
		assert.Equal(t, "directives_unavailable", decode(r).Reason)
		// Not a directive document, or no file: a usage error.
		require.NoError(t, os.WriteFile(file, []byte(`{"keys":[]}`), 0o644))
		assert.Equal(t, exitUsage, runCLI(t, "", append(base, "--directives", file, tok)...).code)
		assert.Equal(t, exitUsage, runCLI(t, "", append(base, "--directives", file+".missing", tok)...).code)
	})
	t.Run("usage errors", func(t *testing.T) {
		r := runCLI(t, "", "verify", "--jwks", jwks, tok)
		assert.Equal(t, exitUsage, r.code)
		assert.Contains(t, r.stderr, "--issuer")
		assert.Empty(t, r.stdout)

		r = runCLI(t, "", "verify", "--jwks", filepath.Join(t.TempDir(), "missing.json"), "--issuer", "i",
			"--audience", "a", "--product", "p", tok)
		assert.Equal(t, exitUsage, r.code)

		bad := filepath.Join(t.TempDir(), "bad.json")
		require.NoError(t, os.WriteFile(bad, []byte(`{"keys":[]}`), 0o644))
		r = runCLI(t, "", "verify", "--jwks", bad, "--issuer", "i", "--audience", "a", "--product", "p", tok)
		assert.Equal(t, exitUsage, r.code)

		r = runCLI(t, "", append(base, "--leeway", "5m", tok)...)
		assert.Equal(t, exitUsage, r.code, "leeway above 60s")

		r = runCLI(t, "", append(base, tok, tok)...)
		assert.Equal(t, exitUsage, r.code, "two tokens")

		r = runCLI(t, "\n", base...)
		assert.Equal(t, exitUsage, r.code, "empty stdin")

		r = runCLI(t, "", append(base, "--bogus")...)
		assert.Equal(t, exitUsage, r.code)
	})
}

// TestVerifyTakesTheTokenAsGiven: the CLI answers what the library answers
// for the same bytes; it drops only the one trailing newline ("\n" or
// "\r\n") of a token read from stdin, never spaces or a second newline.
func TestVerifyTakesTheTokenAsGiven(t *testing.T) {
	iat := time.Now().Unix()
	jwks, tok := signedToken(t, map[string]any{"iss": "flashgate", "aud": "orders", "sub": "alice",
		"product": "sneaker", "jti": "1.1.1", "iat": iat, "exp": iat + 300})
	base := []string{"verify", "--jwks", jwks, "--issuer", "flashgate", "--audience", "orders", "--product", "sneaker"}
	doc, err := os.ReadFile(jwks)
	require.NoError(t, err)
	set, err := verifier.ParseJWKS(doc)
	require.NoError(t, err)
	v, err := verifier.New(set, verifier.Config{Issuer: "flashgate", Audience: "orders", Product: "sneaker"})
	require.NoError(t, err)
	library := func(raw string) string {
		_, err := v.Verify(context.Background(), raw, verifier.Expect{Product: "sneaker"})
		return verifier.CodeOf(err).String()
	}
	cli := func(r result) (int, string) {
		t.Helper()
		var out verifyResult
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), "stdout %q, stderr %q", r.stdout, r.stderr)
		return r.code, out.Reason
	}

	for _, c := range []struct {
		name, arg, stdin string
		library          string // what the library is given
	}{
		{name: "leading space", arg: " " + tok, library: " " + tok},
		{name: "trailing space", arg: tok + " ", library: tok + " "},
		{name: "trailing newline in an argument", arg: tok + "\n", library: tok + "\n"},
		{name: "leading space on stdin", stdin: " " + tok + "\n", library: " " + tok},
		{name: "trailing space on stdin", stdin: tok + " \n", library: tok + " "},
		{name: "two trailing newlines on stdin", stdin: tok + "\n\n", library: tok + "\n"},
		{name: "a tab before the newline on stdin", stdin: tok + "\t\n", library: tok + "\t"},
		{name: "blanks only on stdin", stdin: "   \n", library: "   "},
	} {
		args := base
		if c.arg != "" {
			args = append(append([]string{}, base...), c.arg)
		}
		code, reason := cli(runCLI(t, c.stdin, args...))
		want := library(c.library)
		assert.NotEqual(t, "ok", want, "%s: the library refuses it", c.name)
		assert.Equal(t, want, reason, "%s: the library's answer", c.name)
		assert.Equal(t, exitFailure, code, c.name)
	}

	for _, stdin := range []string{tok + "\n", tok + "\r\n", tok} {
		code, reason := cli(runCLI(t, stdin, base...))
		assert.Equal(t, "ok", reason, "stdin %q", stdin)
		assert.Equal(t, exitOK, code, "stdin %q", stdin)
	}
}

func TestServeGracefulShutdown(t *testing.T) {
	rs := redistest.Start(t)
	port := redistest.FreePort(t)
	dir := t.TempDir()
	t.Setenv("REDIS_URL", "redis://"+rs.Addr+"/0")
	t.Setenv("FLASHGATE_ADDR", fmt.Sprintf("127.0.0.1:%d", port))
	t.Setenv("FLASHGATE_KEYS_FILE", filepath.Join(dir, "keys.json"))
	t.Setenv("FLASHGATE_ADMIN_TOKEN", "admin-secret-admin-secret-0123456")
	t.Setenv("FLASHGATE_DEFAULT_ROOM", "open")
	t.Setenv("FLASHGATE_LOG_FORMAT", "json")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve"}, strings.NewReader(""), &stdout, &stderr) }()

	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, time.Minute, 20*time.Millisecond, "serve never became healthy: %s", stderr.String())

	// The key ring file was created, and a default room accepts entries.
	_, err := os.Stat(filepath.Join(dir, "keys.json"))
	require.NoError(t, err)
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/rooms/launch/enter", nil)
	req.Header.Set("X-User-ID", "alice")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var entry map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&entry))
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "ACTIVE", entry["state"])

	cancel() // what SIGTERM does
	code := <-done
	assert.Equal(t, exitOK, code, stderr.String())
	logs := stderr.String()
	for _, step := range []string{"no longer accepting", "HTTP server drained", "stopping the admission tick loop",
		"tick loop stopped", "closing the Redis connections"} {
		assert.Contains(t, logs, step)
	}
	_, err = http.Get(base + "/healthz")
	assert.Error(t, err, "the listener is closed")
}

// TestServeEmbeddedWarns: serve warns at startup of the embedded Redis, and
// of a deprecated variable (FLASHGATE_JOURNAL_MAXLEN=0: write off).
func TestServeEmbeddedWarns(t *testing.T) {
	port := redistest.FreePort(t)
	t.Setenv("REDIS_URL", "")
	t.Setenv("FLASHGATE_JOURNAL_MAXLEN", "0")
	t.Setenv("FLASHGATE_ADDR", fmt.Sprintf("127.0.0.1:%d", port))
	t.Setenv("FLASHGATE_KEYS_FILE", filepath.Join(t.TempDir(), "keys.json"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve"}, strings.NewReader(""), &syncBuffer{}, &stderr) }()
	require.Eventually(t, func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, time.Minute, 20*time.Millisecond, "serve never became ready: %s", stderr.String())
	cancel()
	assert.Equal(t, exitOK, <-done)
	assert.GreaterOrEqual(t, strings.Count(stderr.String(), embeddedWarning), 2, stderr.String())
	assert.Regexp(t, `level=WARN msg="FLASHGATE_JOURNAL_MAXLEN=0 means off for one release and will be refused: write FLASHGATE_JOURNAL_MAXLEN=off"`,
		stderr.String())
}

func TestServeBadConfig(t *testing.T) {
	t.Setenv("FLASHGATE_DEFAULT_ROOM", "sometimes")
	r := runCLI(t, "", "serve")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "FLASHGATE_DEFAULT_ROOM")
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestSimulateCommand(t *testing.T) {
	rs := redistest.Start(t)
	r := runCLI(t, "", "simulate", "--users", "60", "--capacity", "5", "--rate", "6000", "--session", "10s",
		"--think", "50ms", "--abandon", "0", "--bad-actors", "0.1", "--poll-scale", "0.2", "--tick", "100ms",
		"--redis", "redis://"+rs.Addr, "--room", redistest.Room("cli"), "--json", "--quiet")
	require.Equal(t, exitOK, r.code, "stdout %s\nstderr %s", r.stdout, r.stderr)
	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	assert.EqualValues(t, 60, rep["users"])
	assert.EqualValues(t, 60, rep["completed"], "--abandon 0 means nobody abandons")
	assert.EqualValues(t, 0, rep["fifo_violations"])
	assert.LessOrEqual(t, rep["peak_active"], float64(5))
	assert.Contains(t, rep["rejections"], "bad_signature")

	r = runCLI(t, "", "simulate", "--users", "0", "--quiet")
	assert.Equal(t, exitUsage, r.code)
	r = runCLI(t, "", "simulate", "--session", "1500ms", "--quiet")
	assert.Equal(t, exitFailure, r.code, "Options validation")
	r = runCLI(t, "", "simulate", "--nope")
	assert.Equal(t, exitUsage, r.code)
}

// TestKeysAddNext: a ring without a next key (hand-edited) refuses to
// rotate and says how to repair it; add-next publishes one, then rotate works.
func TestKeysAddNext(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ring.json")
	r := runCLI(t, "", "keys", "generate", "-file", file)
	require.Equal(t, exitOK, r.code, r.stderr)

	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(raw, &doc))
	var kept []any
	for _, k := range doc["keys"].([]any) {
		if k.(map[string]any)["flashgate_status"] != "next" {
			kept = append(kept, k)
		}
	}
	require.Len(t, kept, 1)
	doc["keys"] = kept
	raw, err = json.Marshal(doc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, raw, 0o600))

	r = runCLI(t, "", "keys", "rotate", "-file", file)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "flashgate keys add-next")

	r = runCLI(t, "", "keys", "add-next", "-file", file)
	require.Equal(t, exitOK, r.code, r.stderr)
	ring, err := keys.Load(file)
	require.NoError(t, err)
	statuses := map[keys.Status]int{}
	for _, k := range ring.Keys() {
		statuses[k.Status]++
	}
	assert.Equal(t, map[keys.Status]int{keys.StatusActive: 1, keys.StatusNext: 1}, statuses)

	r = runCLI(t, "", "keys", "rotate", "-file", file)
	require.Equal(t, exitOK, r.code, r.stderr)
	r = runCLI(t, "", "keys", "add-next", "-file", file, "extra")
	assert.Equal(t, exitUsage, r.code, "positional arguments are refused")
}

// TestServeEnvOff: FLASHGATE_MAX_AUTO_ROOMS, FLASHGATE_AUTO_ROOM_IDLE,
// FLASHGATE_JOURNAL_MAXLEN and FLASHGATE_DEFAULT_ARRIVAL_WINDOW reach
// issuer.Config as its named off value when set to off (any case) or to 0
// (deprecated, with a warning, except the arrival window's), as the
// issuer's default when unset, as themselves when set to a value; a
// negative one is refused.
func TestServeEnvOff(t *testing.T) {
	type fields struct {
		maxAuto int
		idle    time.Duration
		journal int64
		window  time.Duration
	}
	read := func(c issuer.Config) fields {
		return fields{c.MaxAutoRooms, c.AutoRoomIdle, c.JournalMaxLen, c.DefaultRoom.ArrivalWindow}
	}
	off := fields{issuer.NoAutoRoomLimit, issuer.AutoRoomNeverIdle, issuer.NoJournal, issuer.ArrivalWindowOff}
	for _, tc := range []struct {
		name    string
		environ map[string]string
		want    fields
		warns   []string
	}{
		{"off", map[string]string{"FLASHGATE_MAX_AUTO_ROOMS": "off", "FLASHGATE_AUTO_ROOM_IDLE": "OFF", "FLASHGATE_JOURNAL_MAXLEN": "Off",
			"FLASHGATE_DEFAULT_ARRIVAL_WINDOW": "off"}, off, nil},
		{"0", map[string]string{"FLASHGATE_MAX_AUTO_ROOMS": "0", "FLASHGATE_AUTO_ROOM_IDLE": "0", "FLASHGATE_JOURNAL_MAXLEN": "0",
			"FLASHGATE_DEFAULT_ARRIVAL_WINDOW": "0"}, off, []string{
			"FLASHGATE_MAX_AUTO_ROOMS=0 means off for one release and will be refused: write FLASHGATE_MAX_AUTO_ROOMS=off",
			"FLASHGATE_AUTO_ROOM_IDLE=0 means off for one release and will be refused: write FLASHGATE_AUTO_ROOM_IDLE=off",
			"FLASHGATE_JOURNAL_MAXLEN=0 means off for one release and will be refused: write FLASHGATE_JOURNAL_MAXLEN=off"}},
		{"0s", map[string]string{"FLASHGATE_AUTO_ROOM_IDLE": "0s"},
			fields{issuer.DefaultMaxAutoRooms, issuer.AutoRoomNeverIdle, issuer.DefaultJournalMaxLen, issuer.DefaultArrivalWindow},
			[]string{"FLASHGATE_AUTO_ROOM_IDLE=0 means off for one release and will be refused: write FLASHGATE_AUTO_ROOM_IDLE=off"}},
		{"default", map[string]string{},
			fields{issuer.DefaultMaxAutoRooms, issuer.DefaultAutoRoomIdle, issuer.DefaultJournalMaxLen, issuer.DefaultArrivalWindow}, nil},
		{"value", map[string]string{"FLASHGATE_MAX_AUTO_ROOMS": "7", "FLASHGATE_AUTO_ROOM_IDLE": "90s", "FLASHGATE_JOURNAL_MAXLEN": "5000",
			"FLASHGATE_DEFAULT_ARRIVAL_WINDOW": "2m"}, fields{7, 90 * time.Second, 5000, 2 * time.Minute}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.environ["FLASHGATE_DEFAULT_ROOM"] = "open"
			c, err := loadServeEnv(tc.environ)
			require.NoError(t, err)
			assert.Equal(t, tc.want, read(c.Serve.issuerConfig()))
			assert.Equal(t, tc.want.window, c.Serve.defaultRoom().ArrivalWindow)
			assert.Equal(t, tc.warns, c.Serve.deprecations())
		})
	}
	for v, want := range map[string]string{
		"FLASHGATE_MAX_AUTO_ROOMS":         "FLASHGATE_MAX_AUTO_ROOMS must be off or positive, got -1",
		"FLASHGATE_AUTO_ROOM_IDLE":         "FLASHGATE_AUTO_ROOM_IDLE must be off or positive, got -1s",
		"FLASHGATE_JOURNAL_MAXLEN":         "FLASHGATE_JOURNAL_MAXLEN must be off or positive, got -1",
		"FLASHGATE_DEFAULT_ARRIVAL_WINDOW": "FLASHGATE_DEFAULT_ARRIVAL_WINDOW must be off or positive, got -1s",
	} {
		val := "-1"
		if strings.HasSuffix(want, "s") {
			val = "-1s"
		}
		_, err := loadServeEnv(map[string]string{v: val})
		assert.EqualError(t, err, want, v)
	}
	_, err := loadServeEnv(map[string]string{"FLASHGATE_MAX_AUTO_ROOMS": "of"})
	assert.ErrorContains(t, err, "FLASHGATE_MAX_AUTO_ROOMS: not a valid integer or off")
}
