package issuer_test

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/internal/testing/testkit"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/scripts*.golden from this run")

// TestScriptsGolden is the scripts' safety net (issue 24): one scripted,
// deterministic sequence that runs every script and policy against a fresh
// redis-server, and records
//
//   - testdata/scripts.golden: each step's decoded result (the Go values the
//     issuer returns, times as offsets from the clock's start) and, after
//     each phase, what changed in the Redis dump (redistest.Dump, one line
//     per string, hash field, ZSET or set member and journal event, plus
//     each key's TTL in seconds);
//   - testdata/scripts-raw.golden: each script call's raw reply, in order,
//     under the step that made it.
//
// A rewrite of the scripts must leave scripts.golden byte-identical; the
// raw file changes only where a reply's encoding changes on purpose.
// Determinism: the clock is injected (Config.Now: the scripts' ARGV[1]);
// each room's epoch and lottery seed are written into its config hash
// before its first SetRoom (configure keeps both); epochs the scripts make
// (Redis TIME: an auto room) and invite ids (crypto/rand) read as EPOCH#n
// and INVITE#n, and the waiting tokens carrying such an epoch lose their
// MAC; PollAfter (jitter) is not shown. Regenerate with
// `go test ./issuer -run TestScriptsGolden -update`.
func TestScriptsGolden(t *testing.T) {
	g := newGolden(t)
	g.run()
	g.check()
}

type golden struct {
	t        *testing.T
	ctx      context.Context
	rdb      *redis.Client
	clk      *testkit.Clock
	is       *issuer.Issuer // exact status (StatusSnapshot off)
	snap     *issuer.Issuer // status from the room snapshot (snapshot.lua)
	auto     *issuer.Issuer // DefaultRoom set: enters create auto rooms
	ring     *keys.Ring     // signs invites
	out, raw bytes.Buffer
	mu       sync.Mutex // raw, hold, held, inBatch, mintedSum (the hook runs on callers' goroutines)
	// hold, when set, is taken by the next script call, which closes held
	// and waits for hold to close before it runs (batch).
	hold, held chan struct{}
	inBatch    bool            // within batch: minted notes are summed (their split in calls is timing)
	mintedSum  int64           // notes written by minted calls within the batch
	last       map[string]bool // the previous phase's dump lines
	names      []string        // random values seen, in order (epochs, invite ids)
	tokens     map[string]string
}

func newGolden(t *testing.T) *golden {
	g := &golden{t: t, ctx: context.Background(), clk: newClock(), tokens: map[string]string{}, last: map[string]bool{}}
	g.rdb = redistest.Start(t).Client(t)
	g.rdb.AddHook(g)
	ring, err := keys.Generate(g.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	g.ring = ring
	exact := func(c *issuer.Config) { c.StatusSnapshot = -1; c.Invites = ring }
	g.is = newIssuer(t, g.rdb, g.clk, exact)
	g.snap = newIssuer(t, g.rdb, g.clk, func(c *issuer.Config) { c.StatusSnapshot = issuer.SuggestedStatusSnapshot })
	g.auto = newIssuer(t, g.rdb, g.clk, exact, func(c *issuer.Config) {
		c.DefaultRoom = &issuer.RoomConfig{Capacity: 1, RatePerMinute: 600, State: issuer.RoomOpen}
		c.MaxAutoRooms = 2
	})
	return g
}

// The hook records every script call's reply (raw file) under g.step;
// NOSCRIPT (first use of a script: go-redis then EVALs) is left out.
func (g *golden) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *golden) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (g *golden) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := strings.ToLower(cmd.Name())
		if name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		g.mu.Lock()
		hold, held := g.hold, g.held
		g.hold = nil
		g.mu.Unlock()
		if hold != nil {
			close(held)
			<-hold
		}
		err := next(ctx, cmd)
		if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			return err
		}
		script := "?"
		if a := cmd.Args(); len(a) > 1 {
			if s, ok := a[1].(string); ok {
				if name == "eval" {
					s = fmt.Sprintf("%x", sha1.Sum([]byte(s)))
				}
				script = issuer.ScriptName(s)
				if s == issuer.AuditHash { // not among ScriptName's
					script = "audit"
				}
			}
		}
		var line string
		if c, ok := cmd.(*redis.Cmd); ok && err == nil {
			line = rawValue(c.Val())
		} else {
			line = "error " + strconv.Quote(fmt.Sprint(err))
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if c, ok := cmd.(*redis.Cmd); ok && g.inBatch && script == "minted" && err == nil {
			n, _ := c.Val().(int64)
			g.mintedSum += n
			return err
		}
		fmt.Fprintf(&g.raw, "  %s %s\n", script, line)
		return err
	}
}

func rawValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "nil"
	case string:
		return strconv.Quote(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = rawValue(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case error:
		return "error " + strconv.Quote(x.Error())
	}
	return fmt.Sprintf("%T(%v)", v, v)
}

// phase starts a phase: a header in both files.
func (g *golden) phase(name string) {
	fmt.Fprintf(&g.out, "\n== %s\n", name)
	g.mu.Lock()
	fmt.Fprintf(&g.raw, "\n== %s\n", name)
	g.mu.Unlock()
}

// begin starts the step name in both files; end records its results.
func (g *golden) begin(name string) {
	g.mu.Lock()
	fmt.Fprintf(&g.raw, "> %s\n", name)
	g.mu.Unlock()
	fmt.Fprintf(&g.out, "> %s\n", name)
}

func (g *golden) end(results ...any) {
	for _, r := range results {
		fmt.Fprintf(&g.out, "  %s\n", show(r))
	}
}

// step1 runs f as the step name and records its results; the minted
// note of an exchange lands within its step.
func (g *golden) step1(name string, f func() []any) {
	g.t.Helper()
	g.begin(name)
	g.end(f()...)
	if err := g.is.WaitMinted(g.ctx); err != nil {
		g.t.Fatal(err)
	}
}

// batch runs calls as one coalesced script call, in order: hold (a call
// of the same coalescer, kind as issuer.Queued's) is started and held in
// the hook before its script runs; each of calls is started once the one
// before it waits in the room's queue; then hold is let go, and the
// queued calls go together. Records hold's and each call's results, and
// the script calls and items the batch took (Observe().Batches).
func (g *golden) batch(name, room, kind string, hold func() []any, calls ...func() []any) {
	g.t.Helper()
	g.begin(name)
	h, held := make(chan struct{}), make(chan struct{})
	g.mu.Lock()
	g.hold, g.held, g.inBatch, g.mintedSum = h, held, true, 0
	g.mu.Unlock()
	before := g.is.Observe().Batches
	results := make([][]any, len(calls)+1)
	var wg sync.WaitGroup
	wg.Go(func() { results[0] = hold() })
	deadline := time.Now().Add(20 * time.Second)
	<-held
	for i, c := range calls {
		wg.Go(func() { results[i+1] = c() })
		for g.is.Queued(room, kind) < i+1 {
			if time.Now().After(deadline) {
				g.t.Fatalf("%s: call %d never reached the %s queue (refused before it?)", name, i+1, kind)
			}
			time.Sleep(time.Millisecond)
		}
	}
	close(h)
	wg.Wait()
	if err := g.is.WaitMinted(g.ctx); err != nil {
		g.t.Fatal(err)
	}
	after := g.is.Observe().Batches
	g.mu.Lock()
	g.inBatch = false
	if g.mintedSum > 0 {
		fmt.Fprintf(&g.raw, "  minted Σ %d\n", g.mintedSum)
	}
	g.mu.Unlock()
	for i, r := range results {
		label := "hold"
		if i > 0 {
			label = strconv.Itoa(i)
		}
		parts := make([]string, len(r))
		for j, x := range r {
			parts[j] = show(x)
		}
		fmt.Fprintf(&g.out, "  %s: %s\n", label, strings.Join(parts, " "))
	}
	d := func(a, b issuer.BatchStats) string { return fmt.Sprintf("%d/%d", b.Calls-a.Calls, b.Items-a.Items) }
	fmt.Fprintf(&g.out, "  calls/items: enter %s status %s exchange %s complete %s\n", d(before.Enter, after.Enter),
		d(before.Status, after.Status), d(before.Exchange, after.Exchange), d(before.Complete, after.Complete))
}

// newRoom writes the room's epoch and lottery seed into its config hash
// (configure keeps both) and then configures it.
func (g *golden) newRoom(room, epoch string, c issuer.RoomConfig) {
	g.t.Helper()
	fields := []any{"epoch", epoch}
	if c.PreQueue == issuer.PreQueueShuffle {
		fields = append(fields, "lottery_seed", "00112233445566778899aabbccddeeff")
	}
	if err := g.rdb.HSet(g.ctx, issuer.RoomKeys(room)[0], fields...).Err(); err != nil {
		g.t.Fatal(err)
	}
	g.step1("SetRoom "+room, func() []any { return pair(g.is.SetRoom(g.ctx, room, c)) })
}

func pair[T any](v T, err error) []any { return []any{v, err} }

// dump records what changed in Redis since the last dump.
func (g *golden) dump() {
	g.t.Helper()
	lines := g.dumpLines()
	var plus, minus []string
	for l := range lines {
		if !g.last[l] {
			plus = append(plus, "+ "+l)
		}
	}
	for l := range g.last {
		if !lines[l] {
			minus = append(minus, "- "+l)
		}
	}
	sort.Strings(plus)
	sort.Strings(minus)
	fmt.Fprintf(&g.out, "-- redis (%d lines; changes)\n", len(lines))
	for _, l := range append(minus, plus...) {
		fmt.Fprintf(&g.out, "%s\n", l)
	}
	g.last = lines
}

func (g *golden) dumpLines() map[string]bool {
	g.t.Helper()
	d := redistest.Dump(g.t, g.rdb, false)
	lines := map[string]bool{}
	add := func(format string, a ...any) { lines[fmt.Sprintf(format, a...)] = true }
	for tk, v := range d {
		typ, k, _ := strings.Cut(tk, " ")
		switch x := v.(type) {
		case string:
			add("%s %s = %q", typ, k, x)
		case map[string]string:
			for f, val := range x {
				add("%s %s %s = %q", typ, k, f, val)
				if f == "epoch" {
					g.name("EPOCH", val)
				}
			}
		case []redis.Z:
			for _, z := range x {
				add("%s %s %v = %s", typ, k, z.Member, strconv.FormatFloat(z.Score, 'f', -1, 64))
			}
		case []string:
			for _, m := range x {
				add("%s %s %s", typ, k, m)
			}
		case []map[string]any:
			for i, ev := range x {
				fs := make([]string, 0, len(ev))
				for f, val := range ev {
					s := fmt.Sprint(val)
					var obj map[string]any
					if json.Unmarshal([]byte(s), &obj) == nil && obj != nil {
						b, _ := json.Marshal(obj) // sorted keys: a field order change is no change
						s = string(b)
					}
					fs = append(fs, f+"="+strconv.Quote(s))
				}
				sort.Strings(fs)
				add("%s %s #%03d %s", typ, k, i+1, strings.Join(fs, " "))
			}
		default:
			g.t.Fatalf("dump: %s: unexpected %T", tk, v)
		}
		ttl, err := g.rdb.PTTL(g.ctx, k).Result()
		if err != nil {
			g.t.Fatal(err)
		}
		if ttl > 0 { // minutes, rounded up: read up to seconds (real time) after it was set
			add("ttl %s = %dm", k, int64(math.Ceil(ttl.Minutes())))
		}
	}
	return lines
}

// name registers a random value (an epoch the scripts made, an invite id)
// to be shown as PREFIX#n, n by its first appearance in the output;
// fixed epochs (the golden rooms', "g…") are kept. Only an EPOCH is
// checked for that prefix: a random invite id starts with "g" one time in
// 64, and must be normalised all the same.
func (g *golden) name(prefix, v string) {
	if (prefix == "EPOCH" && strings.HasPrefix(v, "g")) || slices.Contains(g.names, v) {
		return
	}
	g.names = append(g.names, v)
	g.tokens[v] = prefix
}

var waitingMAC = regexp.MustCompile(`(fgw2_[A-Za-z0-9_-]{4}_EPOCH#\d+_\d+_)[A-Za-z0-9_-]+`)

// normalise replaces the registered random values in s (both files, in
// that order), numbered by where each first appears.
func (g *golden) normalise(s string) string {
	first := func(v string) int {
		if i := strings.Index(s, v); i >= 0 {
			return i
		}
		return len(s)
	}
	names := slices.Clone(g.names)
	slices.SortStableFunc(names, func(a, b string) int { return first(a) - first(b) })
	n := map[string]int{}
	for _, v := range names {
		n[g.tokens[v]]++
		s = strings.ReplaceAll(s, v, fmt.Sprintf("%s#%d", g.tokens[v], n[g.tokens[v]]))
	}
	return waitingMAC.ReplaceAllString(s, "${1}MAC")
}

func (g *golden) check() {
	g.t.Helper()
	const sep = "\n\x00 raw \x00\n"
	both := strings.SplitN(g.normalise(g.out.String()+sep+g.raw.String()), sep, 2)
	for i, name := range []string{"scripts.golden", "scripts-raw.golden"} {
		got := []byte(both[i])
		path := filepath.Join("testdata", name)
		if *updateGolden {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				g.t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			g.t.Fatalf("%v (run with -update to create it)", err)
		}
		if !bytes.Equal(got, want) {
			g.t.Errorf("%s differs from this run (first difference at line %s\n"+
				"run `go test ./issuer -run TestScriptsGolden -update` if the change is on purpose, and explain it",
				path, firstDiff(want, got))
		}
	}
}

// firstDiff returns the line number of the first difference and a few
// lines of context from both.
func firstDiff(want, got []byte) string {
	w, g := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	ctx := func(l []string) string {
		lo, hi := max(0, i-3), min(len(l), i+4)
		return strings.Join(l[lo:hi], "\n")
	}
	return fmt.Sprintf("%d\n--- want:\n%s\n--- got:\n%s", i+1, ctx(w), ctx(g))
}

// show prints a Go value deterministically: structs as {Field:value …}
// without their zero fields, pointers as what they point to, times as
// offsets from the clock's start (testkit.Epoch), errors as their code and
// message, admission tokens as their claims. PollAfter (jitter) is left out.
func show(v any) string {
	if v == nil {
		return "nil"
	}
	if err, ok := v.(error); ok {
		var fe *flashgate.Error
		if errors.As(err, &fe) {
			return fmt.Sprintf("error %s: %s", fe.Code, err)
		}
		return "error " + err.Error()
	}
	return showValue(reflect.ValueOf(v))
}

var timeType = reflect.TypeOf(time.Time{})

func showValue(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Invalid:
		return "nil"
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return "nil"
		}
		if err, ok := v.Interface().(error); ok && v.Kind() == reflect.Interface {
			return show(err)
		}
		return showValue(v.Elem())
	}
	switch x := v.Interface().(type) {
	case time.Time:
		if x.IsZero() {
			return "0"
		}
		d := x.Sub(testkit.Epoch)
		if d < 0 {
			return "T-" + (-d).String()
		}
		return "T+" + d.String()
	case time.Duration:
		return x.String()
	case json.RawMessage:
		return string(x)
	case string:
		return strconv.Quote(showToken(x))
	}
	switch v.Kind() {
	case reflect.Struct:
		var parts []string
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() || f.Name == "PollAfter" || v.Field(i).IsZero() {
				continue
			}
			parts = append(parts, f.Name+":"+showValue(v.Field(i)))
		}
		return "{" + strings.Join(parts, " ") + "}"
	case reflect.Slice, reflect.Array:
		parts := make([]string, v.Len())
		for i := range v.Len() {
			parts[i] = showValue(v.Index(i))
		}
		return "[" + strings.Join(parts, " ") + "]"
	case reflect.Map:
		parts := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			parts = append(parts, fmt.Sprint(k.Interface())+":"+showValue(v.MapIndex(k)))
		}
		sort.Strings(parts)
		return "map[" + strings.Join(parts, " ") + "]"
	}
	return fmt.Sprint(v.Interface())
}

// showToken shows a compact JWS as its claims (the signature adds nothing
// the claims do not decide: the key is fixed).
func showToken(s string) string {
	p := strings.Split(s, ".")
	if len(p) != 3 || !strings.HasPrefix(s, "eyJ") {
		return s
	}
	b, err := base64.RawURLEncoding.DecodeString(p[1])
	if err != nil {
		return s
	}
	return "jws" + string(b)
}

// The sequence. Each phase ends with a dump of what it changed.
func (g *golden) run() {
	ctx, is, clk := g.ctx, g.is, g.clk
	sec := func(n int) { clk.Advance(time.Duration(n) * time.Second) }
	enter := func(room, user string) *issuer.Entry {
		var e *issuer.Entry
		g.step1("Enter "+room+" "+user, func() []any {
			var err error
			e, err = is.Enter(ctx, room, user)
			return []any{e, err}
		})
		return e
	}
	status := func(s *issuer.Issuer, e *issuer.Entry) {
		g.step1("Status "+e.Room+" "+e.User, func() []any { return pair(s.Status(ctx, e.Room, e.User, e.WaitingToken)) })
	}
	exchange := func(e *issuer.Entry) *issuer.Admission {
		var a *issuer.Admission
		g.step1("Exchange "+e.Room+" "+e.User, func() []any {
			var err error
			a, err = is.Exchange(ctx, e.Room, e.User, e.WaitingToken)
			return []any{a, err}
		})
		return a
	}
	tick := func(room string) {
		g.step1("Tick "+room, func() []any { return pair(is.Tick(ctx, room)) })
	}
	stats := func(room string) {
		g.step1("Stats "+room, func() []any { return pair(is.Stats(ctx, room)) })
	}

	// A fifo room with an arrival window: enter while paused, status, leave,
	// open, admit, exchange (claim), complete (twice), the window's expiry,
	// complete-minted, revoke with its ban, ban of a waiting user, unban.
	g.phase("fifo: enter, status, leave, tick, exchange, complete, arrival window, revoke, ban")
	room := "gfifo"
	g.newRoom(room, "gfifo1", issuer.RoomConfig{Capacity: 2, RatePerMinute: 600, SessionDuration: 10 * time.Minute,
		TickBatch: 10, State: issuer.RoomPaused, ArrivalWindow: 30 * time.Second})
	u := map[string]*issuer.Entry{}
	for _, n := range []string{"u1", "u2", "u3", "u4", "u5", "u6", "u7"} {
		u[n] = enter(room, n)
		sec(1)
	}
	enter(room, "u1") // a repeated enter: the same entry
	status(is, u["u1"])
	status(is, u["u3"])
	g.step1("Status "+room+" u2 with u1's token", func() []any { return []any{ignore(is.Status(ctx, room, "u2", u["u1"].WaitingToken))} })
	g.step1("Leave "+room+" u5", func() []any { return []any{is.Leave(ctx, room, "u5", u["u5"].WaitingToken)} })
	g.step1("Leave "+room+" u5 again", func() []any { return []any{is.Leave(ctx, room, "u5", u["u5"].WaitingToken)} })
	status(is, u["u5"])
	g.dump()
	g.step1("SetState "+room+" open", func() []any { return pair(is.SetState(ctx, room, issuer.RoomOpen)) })
	tick(room)
	status(is, u["u1"])
	exchange(u["u3"]) // still waiting: not admitted
	a1 := exchange(u["u1"])
	exchange(u["u1"]) // the same admission again
	g.step1("CheckActive "+room+" u1", func() []any { return []any{is.CheckActive(ctx, room, a1.ID)} })
	sec(5)
	g.step1("Complete "+room+" u1", func() []any { return pair(is.Complete(ctx, room, "u1", a1.ID)) })
	g.step1("Complete "+room+" u1 again", func() []any { return pair(is.Complete(ctx, room, "u1", a1.ID)) })
	g.step1("Complete "+room+" unknown jti", func() []any { return pair(is.Complete(ctx, room, "u9", "gfifo1.9.9.1")) })
	status(is, u["u1"])
	g.step1("CheckActive "+room+" u1 completed", func() []any { return []any{is.CheckActive(ctx, room, a1.ID)} })
	g.dump()
	sec(31) // u2 never claimed its admission within the 30 s window
	tick(room)
	status(is, u["u2"])
	exchange(u["u2"])
	a3 := exchange(u["u3"])
	sec(2)
	g.step1("CompleteMinted "+room+" u3", func() []any { return pair(is.CompleteMinted(ctx, room, "u3", a3.ID, a3.Token)) })
	g.step1("CompleteMinted "+room+" u3 again", func() []any { return pair(is.CompleteMinted(ctx, room, "u3", a3.ID, a3.Token)) })
	tick(room)
	status(is, u["u4"])
	g.step1("Revoke "+room+" u4", func() []any { return pair(is.Revoke(ctx, room, "u4", "")) })
	g.step1("Revoke "+room+" u4 again", func() []any { return pair(is.Revoke(ctx, room, "u4", "")) })
	status(is, u["u4"])
	enter(room, "u4") // banned
	g.step1("Ban "+room+" u6 (admitted)", func() []any { return pair(is.Ban(ctx, room, "u6", time.Hour, "bot")) })
	status(is, u["u6"])
	g.step1("Ban "+room+" u7 (waiting)", func() []any { return pair(is.Ban(ctx, room, "u7", time.Hour, "")) })
	status(is, u["u7"])
	g.step1("Bans "+room, func() []any { return pair(is.Bans(ctx, room, "", 10)) })
	g.step1("Unban "+room+" u4", func() []any { return []any{is.Unban(ctx, room, "u4")} })
	g.step1("Bans "+room, func() []any { return pair(is.Bans(ctx, room, "", 10)) })
	tick(room)
	e8 := enter(room, "u8") // the line is empty: the fast track
	status(is, e8)
	g.step1("RevokeWith "+room+" u8 no ban", func() []any {
		zero := time.Duration(0)
		return pair(is.RevokeWith(ctx, room, "u8", "", issuer.RevokeOptions{Ban: &zero}))
	})
	for _, n := range []string{"u9", "u10", "u11", "u12"} {
		u[n] = enter(room, n)
	}
	g.step1("JournalAudit "+room, func() []any {
		return pair(is.JournalAudit(ctx, room, issuer.Audit{Actor: "golden", Action: "configure", Detail: json.RawMessage(`{"capacity":2}`)}))
	})
	g.step1("ClaimExporter "+room, func() []any { return pair(is.ClaimExporter(ctx, room, "replica-1", time.Minute)) })
	g.step1("ClaimExporter "+room+" other replica", func() []any { return pair(is.ClaimExporter(ctx, room, "replica-2", time.Minute)) })
	stats(room)
	g.step1("Room "+room, func() []any { return pair(is.Room(ctx, room)) })
	g.dump()

	// The pre-queue lottery: a shuffle room entered before its opening, then
	// opened: the first script to find it open draws, the ticks place, then
	// admit; an entry after the opening joins behind the drawn ones.
	g.phase("lottery: shuffle pre-queue, draw, placing, admissions")
	room = "gshuf"
	g.newRoom(room, "gshuf1", issuer.RoomConfig{Capacity: 3, RatePerMinute: 6000, SessionDuration: 10 * time.Minute,
		TickBatch: 10, Opens: clk.Now().Add(time.Hour), PreQueue: issuer.PreQueueShuffle})
	s := map[int]*issuer.Entry{}
	for i := 1; i <= 8; i++ {
		s[i] = enter(room, "s"+strconv.Itoa(i))
	}
	status(is, s[1])
	stats(room)
	g.dump()
	clk.Advance(time.Hour)
	status(is, s[2]) // draws the lottery
	stats(room)
	tick(room) // places, admits the first three drawn
	for i := 1; i <= 8; i++ {
		status(is, s[i])
	}
	s[9] = enter(room, "s9")
	tick(room)
	stats(room)
	g.dump()

	// Lanes: a single-use priority invite, its reuse, a bypass invite; the
	// priority lane admitted first. Then the snapshot issuer's status.
	g.phase("lanes: invites, priority lane, bypass; status from the snapshot")
	room = "glane"
	g.newRoom(room, "glane1", issuer.RoomConfig{Capacity: 2, RatePerMinute: 600, SessionDuration: 10 * time.Minute,
		TickBatch: 10, State: issuer.RoomPaused})
	p1, p2 := enter(room, "p1"), enter(room, "p2")
	invite := func(o issuer.InviteOptions) string {
		var tok string
		g.step1(fmt.Sprintf("Invites %s %s single=%v", room, o.Lane, !o.Reusable), func() []any {
			inv, err := is.Invites(room, o)
			if err != nil {
				return []any{err}
			}
			g.name("INVITE", inv[0].ID)
			tok = inv[0].Token
			inv[0].Token = "" // signed by a random key
			return []any{inv[0]}
		})
		return tok
	}
	enterInv := func(user, tok string) *issuer.Entry {
		var e *issuer.Entry
		g.step1("EnterWithInvite "+room+" "+user, func() []any {
			var err error
			e, err = is.EnterWithInvite(ctx, room, user, tok)
			return []any{e, err}
		})
		return e
	}
	pri := invite(issuer.InviteOptions{Lane: flashgate.LanePriority})
	v1 := enterInv("v1", pri)
	enterInv("v1", pri) // the same place again
	enterInv("v2", pri) // used
	byp := invite(issuer.InviteOptions{Lane: flashgate.LaneBypass, User: "b1", Reusable: true})
	enterInv("b1", byp) // admitted at once (paused room: bypass)
	status(is, v1)
	status(is, p2)
	var q []*issuer.Entry // a line long enough for the snapshot to answer its tail
	g.step1("Enter "+room+" q1 … q80", func() []any {
		for i := 1; i <= 80; i++ {
			e, err := is.Enter(ctx, room, "q"+strconv.Itoa(i))
			if err != nil {
				return []any{err}
			}
			q = append(q, e)
		}
		return []any{q[len(q)-1]}
	})
	g.step1("SetState "+room+" open", func() []any { return pair(is.SetState(ctx, room, issuer.RoomOpen)) })
	tick(room)
	status(is, v1)
	status(is, p1)
	status(g.snap, q[79]) // from the snapshot: an estimated position
	status(g.snap, q[0])  // near the head: exact
	stats(room)
	g.dump()

	// Coalesced calls (Config.EnterBatch): several callers in one script
	// call, each with its own answer; refusals of one item reach it alone.
	g.phase("batches: coalesced enter, status and exchange, complete")
	room = "gbat"
	g.newRoom(room, "gbat1", issuer.RoomConfig{Capacity: 3, RatePerMinute: 6000, SessionDuration: 10 * time.Minute,
		TickBatch: 10, State: issuer.RoomOpen, ArrivalWindow: 30 * time.Second})
	g.step1("Ban "+room+" bx", func() []any { return pair(is.Ban(ctx, room, "bx", time.Hour, "")) })
	be := map[string]*issuer.Entry{}
	ba := map[string]*issuer.Admission{}
	var bmu sync.Mutex
	enterC := func(user string) func() []any {
		return func() []any {
			e, err := is.Enter(ctx, room, user)
			if err == nil {
				bmu.Lock()
				be[user] = e
				bmu.Unlock()
			}
			return []any{e, err}
		}
	}
	g.batch("Enter "+room+" b0 | b1 b2 b3 bx b4 b1 b5", room, "enter", enterC("b0"),
		enterC("b1"), enterC("b2"), enterC("b3"), enterC("bx"), enterC("b4"), enterC("b1"), enterC("b5"))
	g.step1("Leave "+room+" b5", func() []any { return []any{is.Leave(ctx, room, "b5", be["b5"].WaitingToken)} })
	statusC := func(user string) func() []any {
		return func() []any { return pair(is.Status(ctx, room, user, be[user].WaitingToken)) }
	}
	exchangeC := func(user string) func() []any {
		return func() []any {
			a, err := is.Exchange(ctx, room, user, be[user].WaitingToken)
			if err == nil {
				bmu.Lock()
				ba[user] = a
				bmu.Unlock()
			}
			return []any{a, err}
		}
	}
	sec(1)
	g.batch("Status "+room+" b3 | status b4, exchange b0, status b0, exchange b1, exchange b1, status b5, exchange b3, status b2",
		room, "status", statusC("b3"),
		statusC("b4"), exchangeC("b0"), statusC("b0"), exchangeC("b1"), exchangeC("b1"), statusC("b5"), exchangeC("b3"), statusC("b2"))
	sec(1)
	completeC := func(user, jti string) func() []any {
		return func() []any { return pair(is.Complete(ctx, room, user, jti)) }
	}
	g.batch("Complete "+room+" b0 | complete b1, b0 again, minted b1, b2 (unclaimed), unknown jti, b1 as b0",
		room, "complete", completeC("b0", ba["b0"].ID),
		completeC("b1", ba["b1"].ID), completeC("b0", ba["b0"].ID),
		func() []any { return pair(is.CompleteMinted(ctx, room, "b1", ba["b1"].ID, ba["b1"].Token)) },
		completeC("b2", be["b2"].AdmissionID), completeC("b9", "gbat1.9.9.1"), completeC("b0", ba["b1"].ID))
	tick(room)
	stats(room)
	g.dump()

	// The end of a sale: sold out (every waiting entry reads CLOSED, enters
	// refused, the tick drains the line); an event window that ends by
	// itself; a delete; a reopening starts a new line.
	g.phase("end: sold out, drain, event window, delete, reopen")
	room = "gfifo"
	g.step1("SoldOut "+room, func() []any { return pair(is.SoldOut(ctx, room)) })
	status(is, u["u11"])
	status(is, u["u9"])
	enter(room, "u13")
	tick(room)
	status(is, u["u12"])
	stats(room)
	room = "gwin"
	g.newRoom(room, "gwin1", issuer.RoomConfig{Capacity: 1, RatePerMinute: 600, SessionDuration: 10 * time.Minute,
		TickBatch: 10, Closes: clk.Now().Add(time.Minute)})
	w1, w2 := enter(room, "w1"), enter(room, "w2")
	sec(61)
	status(is, w2)
	status(is, w1)
	tick(room)
	stats(room)
	g.step1("DeleteRoom glane", func() []any { return pair(is.DeleteRoom(ctx, "glane")) })
	enter("glane", "p3")
	status(is, p2)
	tick("glane")
	g.step1("SetRoom gwin reopened", func() []any {
		return pair(is.SetRoom(ctx, "gwin", issuer.RoomConfig{Capacity: 1, RatePerMinute: 600,
			SessionDuration: 10 * time.Minute, TickBatch: 10}))
	})
	status(is, w2)
	enter("gwin", "w3")
	g.step1("UpdateRoom gwin capacity 3", func() []any {
		c, created, err := is.UpdateRoom(ctx, "gwin", issuer.RoomPatch{Capacity: ptr(3)})
		return []any{c, created, err}
	})
	g.dump()

	// Restore: a room written back from a journaled state (restore.lua),
	// then read and ticked.
	g.phase("restore: a journaled room written back")
	room = "grest"
	admitted := clk.Now().Add(-time.Minute)
	st := issuer.RestoreState{Epoch: "grest1", Clock: clk.Now(), MaxArrival: 4, MaxAdmission: 1,
		Config: map[string]string{"state": "open", "capacity": "2", "rate": "600", "session_ms": "600000",
			"batch": "10", "tick_ms": "1000", "opens_ms": "0", "closes_ms": "0", "arrival_ms": "0",
			"prequeue": "fifo", "journal_maxlen": "1000000", "epoch": "grest1"},
		Stats: map[string]int64{"admitted": 1, "left": 1},
		Entries: []issuer.RestoreEntry{
			{Arrival: 1, User: "r1", Lane: flashgate.LanePublic, AdmissionID: fmt.Sprintf("grest1.1.1.%d", admitted.UnixMilli()),
				EnteredAt: admitted.Add(-time.Minute), AdmittedAt: admitted},
			{Arrival: 2, User: "r2", Lane: flashgate.LanePublic, EnteredAt: admitted},
			{Arrival: 3, User: "r3", Lane: flashgate.LanePriority, EnteredAt: admitted},
			{Arrival: 4, User: "r4", Lane: flashgate.LanePublic, EnteredAt: admitted, EndedAt: admitted, End: "left"},
		}}
	g.step1("Restore "+room, func() []any { return pair(issuer.Restore(ctx, g.rdb, room, st, clk.Now())) })
	g.step1("Restore "+room+" again", func() []any { return pair(issuer.Restore(ctx, g.rdb, room, st, clk.Now())) })
	r2 := enter(room, "r2")
	status(is, r2)
	enter(room, "r1")
	tick(room)
	stats(room)
	g.dump()

	// Auto rooms: an enter into an unknown room creates it under the
	// default policy (its epoch from Redis TIME: EPOCH#n), within the limit.
	g.phase("auto rooms: created by an enter")
	for _, n := range []string{"auto-1", "auto-2", "auto-3"} {
		g.step1("Enter(auto) "+n+" a1", func() []any { return pair(g.auto.Enter(ctx, n, "a1")) })
	}
	var a2 *issuer.Entry
	g.step1("Enter(auto) auto-1 a2", func() []any {
		var err error
		a2, err = g.auto.Enter(ctx, "auto-1", "a2")
		return []any{a2, err}
	})
	status(g.auto, a2)
	g.step1("AutoRooms", func() []any { return pair(g.auto.AutoRooms(ctx)) })
	g.step1("Rooms", func() []any { return pair(is.Rooms(ctx)) })
	g.dump()
}

// ignore keeps a call's error alone.
func ignore(_ any, err error) error { return err }
