package issuer_test

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
)

// redisCPU returns the CPU time redis-server has used (INFO cpu:
// used_cpu_user + used_cpu_sys, the main thread and its helpers).
func redisCPU(b *testing.B, rdb *redis.Client) time.Duration {
	b.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var s float64
	for _, line := range strings.Split(info, "\r\n") {
		for _, k := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatal(err)
				}
				s += f
			}
		}
	}
	return time.Duration(s * float64(time.Second))
}

// BenchmarkScriptRedisCPU measures, for each hot operation, the Redis CPU
// time per operation (INFO cpu deltas over the timed loop, µs-redis/op)
// under concurrency (64 goroutines: SetParallelism 32 on two cores), with
// coalescing on (batch=32, the default: items/call is the mean batch) and
// off (batch=1, one script call per operation), next to its physical
// limit in the same run: one PING per operation (op=ping), the cheapest
// command's dispatch, read and reply. Each sub-benchmark has its own
// redis-server (internal/testing/redistest), so the CPU is this loop's alone (the
// server's own cron included: a few µs per second). Operations:
//   - enter: a new user per call into a paused room (capacity 1);
//   - status: an exact Status (StatusSnapshot off) of one of 2,000 waiting users;
//   - exchange: an Exchange of one of 2,000 admitted users (a repeated claim: a journal write each);
//   - complete: a Complete of a distinct admission per call (admitted before the loop);
//   - complete-minted: the same through CompleteMinted, with each admission's token
//     minted (Exchange) before the loop: the /v1/complete path of a token this issuer
//     minted (its note's GET in the complete script; its admissions are claimed, so
//     the script skips the unclaimed lookup complete's unclaimed admissions need).
//
// Exchange's minted notes are written in the background: the loop's Redis
// CPU is read once they have landed (WaitMinted), so exchange counts them.
//
// Next to each op's row (issue 24), in the same sub-benchmark: its limit
// (µs-limit/op: a script doing only the Redis commands the op needs, in
// calls of the op's mean batch, from 64 connections, on the same server and
// data, right after the op's loop; see limitScripts) and the ratio to it
// (x-limit); the op's script time split by INFO commandstats deltas into
// the commands it ran (µs-cmds/op: Redis 7 counts the commands a script
// runs under their own names) and the rest, Lua (µs-lua/op, lua-%: its
// share of the script time); and the budget (µs-budget/op).
// commandstats times are wall time: on a loaded host they inflate (a
// descheduled Redis), and lua-% is then the steadier figure; µs-redis/op
// and µs-limit/op are CPU time (INFO cpu).
//
// The target: Redis CPU per completion ≤ 2× per enter.
func BenchmarkScriptRedisCPU(b *testing.B) {
	for _, n := range []int{1, issuer.DefaultEnterBatch} {
		for _, op := range []string{"ping", "enter", "status", "exchange", "complete", "complete-minted"} {
			b.Run("batch="+strconv.Itoa(n)+"/op="+op, func(b *testing.B) { benchRedisCPU(b, n, op) })
		}
	}
}

func benchRedisCPU(b *testing.B, batch int, op string) {
	ctx := context.Background()
	rdb := redistest.Start(b).Client(b)
	is := newIssuer(b, rdb, nil, func(c *issuer.Config) { c.EnterBatch = batch; c.StatusSnapshot = -1 })
	room := "bench"
	// The longest arrival window (the same scripts' work as the default's):
	// complete-minted exchanges 2·(b.N+64) admissions one by one before its
	// loop, which at batch 32 outlasted the default 60 s (its admissions
	// expired, not_claimed, and the run failed).
	open := issuer.RoomConfig{Capacity: 10_000_000, RatePerMinute: 10_000_000, SessionDuration: 15 * time.Minute,
		TickBatch: 10_000, State: issuer.RoomOpen, ArrivalWindow: 15 * time.Minute}
	var fn func(i int64) error
	var es, limitEs []*issuer.Entry // the op's entries; the limit row's (complete: others)
	var tokens []string             // complete-minted: es's tokens
	switch op {
	case "ping":
		fn = func(int64) error { return rdb.Ping(ctx).Err() }
	case "enter":
		if _, err := is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1, State: issuer.RoomPaused}); err != nil {
			b.Fatal(err)
		}
		fn = func(i int64) error {
			_, err := is.Enter(ctx, room, "u"+strconv.FormatInt(i, 10))
			return err
		}
	case "status", "exchange":
		cfg := issuer.RoomConfig{Capacity: 1, State: issuer.RoomPaused}
		if op == "exchange" {
			cfg = open
		}
		if _, err := is.SetRoom(ctx, room, cfg); err != nil {
			b.Fatal(err)
		}
		es = entered(b, is, room, 2000, op == "exchange")
		limitEs = es
		fn = func(i int64) error {
			e := es[i%int64(len(es))]
			if op == "status" {
				_, err := is.Status(ctx, room, e.User, e.WaitingToken)
				return err
			}
			_, err := is.Exchange(ctx, room, e.User, e.WaitingToken)
			return err
		}
	case "complete", "complete-minted":
		if _, err := is.SetRoom(ctx, room, open); err != nil {
			b.Fatal(err)
		}
		all := entered(b, is, room, 2*(b.N+64), true)
		es, limitEs = all[:b.N+64], all[b.N+64:] // the limit row completes the second half
		if op == "complete" {
			fn = func(i int64) error {
				e := es[i-1]
				_, err := is.Complete(ctx, room, e.User, e.AdmissionID)
				return err
			}
			break
		}
		tokens = make([]string, len(all))
		for i, e := range all {
			a, err := is.Exchange(ctx, room, e.User, e.WaitingToken)
			if err != nil {
				b.Fatal(err)
			}
			tokens[i] = a.Token
		}
		if err := is.WaitMinted(ctx); err != nil {
			b.Fatal(err)
		}
		fn = func(i int64) error {
			e := es[i-1]
			_, err := is.CompleteMinted(ctx, room, e.User, e.AdmissionID, tokens[i-1])
			return err
		}
	}
	_ = fn(1) // loads the script
	base := is.Observe().Batches
	var next atomic.Int64
	next.Store(1)
	cmd0 := commandStats(b, rdb)
	cpu0 := redisCPU(b, rdb)
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := fn(next.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	if err := is.WaitMinted(ctx); err != nil {
		b.Fatal(err)
	}
	cpu := redisCPU(b, rdb) - cpu0
	cmds := commandStats(b, rdb).sub(cmd0)
	opUs := float64(cpu.Nanoseconds()) / 1000 / float64(b.N)
	b.ReportMetric(opUs, "µs-redis/op")
	st := is.Observe().Batches
	k := map[string][2]issuer.BatchStats{"enter": {base.Enter, st.Enter}, "status": {base.Status, st.Status},
		"exchange": {base.Exchange, st.Exchange}, "complete": {base.Complete, st.Complete},
		"complete-minted": {base.Complete, st.Complete}}[op]
	perCall := 1.0
	if calls := k[1].Calls - k[0].Calls; calls > 0 {
		perCall = float64(k[1].Items-k[0].Items) / float64(calls)
		b.ReportMetric(perCall, "items/call")
	}
	if op == "ping" {
		return
	}
	lua, inner := cmds.scriptShare()
	b.ReportMetric(lua/float64(b.N), "µs-lua/op")
	b.ReportMetric(inner/float64(b.N), "µs-cmds/op")
	b.ReportMetric(100*lua/(lua+inner), "lua-%")
	b.ReportMetric(budgets[batch][strings.TrimSuffix(op, "-minted")], "µs-budget/op")
	// The limit row: the commands op needs alone, in calls of the batch op
	// had, on the same server and data, from as many connections.
	var limitTokens []string // complete-minted: limitEs's tokens
	if len(tokens) > 0 {
		limitTokens = tokens[len(es):]
	}
	limitUs := runLimit(b, rdb, room, op, b.N, max(1, int(math.Round(perCall))), limitEs, limitTokens)
	b.ReportMetric(limitUs, "µs-limit/op")
	b.ReportMetric(opUs/limitUs, "x-limit")
}

// entered enters n distinct users into room (from 64 goroutines, coalesced
// as configured) and returns their entries: all ACTIVE when active (the
// room must admit them on the fast track), else all WAITING.
func entered(b *testing.B, is *issuer.Issuer, room string, n int, active bool) []*issuer.Entry {
	b.Helper()
	ctx := context.Background()
	es := make([]*issuer.Entry, n)
	var next atomic.Int64
	done := make(chan struct{})
	for range 64 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				e, err := is.Enter(ctx, room, "p"+strconv.FormatInt(i, 10))
				if err != nil {
					b.Error(err)
					return
				}
				es[i-1] = e
			}
		}()
	}
	for range 64 {
		<-done
	}
	want := "WAITING"
	if active {
		want = "ACTIVE"
	}
	for _, e := range es {
		if e == nil || string(e.State) != want {
			b.Fatalf("entered: want every entry %s, got %+v", want, e)
		}
	}
	return es
}

// budgets are issue 24's budgets of Redis µs per op (batch → op).
var budgets = map[int]map[string]float64{
	1:                        {"enter": 30, "status": 30, "exchange": 40, "complete": 40},
	issuer.DefaultEnterBatch: {"enter": 5, "status": 3, "exchange": 8, "complete": 8},
}

// cmdStats are INFO commandstats' counters: command → {calls, usec}.
type cmdStats map[string][2]float64

func commandStats(b *testing.B, rdb *redis.Client) cmdStats {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	out := cmdStats{}
	for _, line := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || len(name) == len(line) {
			continue
		}
		var v [2]float64
		for _, kv := range strings.Split(rest, ",") {
			k, x, _ := strings.Cut(kv, "=")
			f, _ := strconv.ParseFloat(x, 64)
			switch k {
			case "calls":
				v[0] = f
			case "usec":
				v[1] = f
			}
		}
		out[name] = v
	}
	return out
}

func (c cmdStats) sub(before cmdStats) cmdStats {
	out := cmdStats{}
	for k, v := range c {
		out[k] = [2]float64{v[0] - before[k][0], v[1] - before[k][1]}
	}
	return out
}

// scriptShare splits the scripts' time (EVALSHA and EVAL usec, which
// include the commands they run) into Lua (the rest) and the commands
// run inside them: Redis 7 counts those in commandstats too, under their
// own names. Every other command counted is taken as run by a script
// (the hot paths send nothing else), except INFO (these readings).
func (c cmdStats) scriptShare() (lua, inner float64) {
	for k, v := range c {
		switch k {
		case "evalsha", "eval":
			lua += v[1]
		case "info":
		default:
			inner += v[1]
		}
	}
	return lua - inner, inner
}

// Limit scripts: what each operation needs of Redis and nothing else (no
// config read, no policy, no clock), one call per batch, KEYS the room's
// (issuer.RoomKeys; exchange's and complete-minted's minted keys after
// them), ARGV the items:
//   - enter (new users): INCRBY seq and ZCARD waiting per call; ZADD NX
//     waiting per user;
//   - status (exact, WAITING): ZCARD waiting per call; ZSCORE and ZRANK
//     waiting per token;
//   - exchange (a repeated claim): HGET users, ZSCORE active, ZREM unclaimed,
//     SET of the minted note (the op writes it in a call of its own) per user;
//   - complete (complete-minted: and GET of the minted note): ZSCORE active,
//     HGET users per admission; one ZREM active, HDEL users, ZADD ended and
//     HINCRBY stats per call;
//   - enter, exchange and complete: one XADD journal per call, the batch
//     entry of lua/prelude_journal.lua's journal_flush (kind batch, epoch, events:
//     one comma-separated line per item, joined by table.concat).
//
// Each answers a reply of the op's shape and size.
const limitJournal = `local events = {}
local function journal(kind, seq, user, jti)
  events[#events + 1] = kind .. ',' .. seq .. ',' .. user .. ',,1795176000000,' .. jti .. ',,'
end
local function journal_flush()
  redis.call('XADD', KEYS[17], 'MAXLEN', '~', 1000000, '*', 'kind', 'batch', 'epoch', 'mjx2k0q8a1',
    'events', table.concat(events, '\n'))
end
`

var limitScripts = map[string]*redis.Script{
	"enter": redis.NewScript(limitJournal + `
local n = #ARGV
local last = redis.call('INCRBY', KEYS[5], n)
local total = redis.call('ZCARD', KEYS[2])
local out = { 0, 6000, 'paused', 'mjx2k0q8a1', {} }
for i = 1, n do
  local seq = last - n + i
  total = total + redis.call('ZADD', KEYS[2], 'NX', seq, ARGV[i])
  journal('entered', seq, ARGV[i], '')
  out[#out + 1] = 1; out[#out + 1] = seq; out[#out + 1] = total; out[#out + 1] = total; out[#out + 1] = 0
end
journal_flush()
return out`),
	"status": redis.NewScript(`
local out = { redis.call('ZCARD', KEYS[2]), 6000, 'paused', {} }
for i = 1, #ARGV do
  local s = redis.call('ZSCORE', KEYS[2], ARGV[i])
  local r = redis.call('ZRANK', KEYS[2], ARGV[i])
  out[#out + 1] = 'WAITING'; out[#out + 1] = tonumber(s); out[#out + 1] = r + 1; out[#out + 1] = 'public'; out[#out + 1] = 0
end
return out`),
	"exchange": redis.NewScript(limitJournal + `
local out = { 0, 6000, 'open', {} }
for i = 1, #ARGV do
  local j = redis.call('HGET', KEYS[4], ARGV[i])
  local e = redis.call('ZSCORE', KEYS[3], j)
  redis.call('ZREM', KEYS[13], j)
  redis.call('SET', KEYS[17 + i], '0123456789abcdef0123456789abcdef', 'PX', 600000)
  journal('exchanged', i, ARGV[i], j)
  out[#out + 1] = 'ACTIVE'; out[#out + 1] = i; out[#out + 1] = j; out[#out + 1] = tonumber(e); out[#out + 1] = 0; out[#out + 1] = ''
end
journal_flush()
return out`),
	"complete": redis.NewScript(limitJournal + `
local out, js, us, z = {}, {}, {}, {}
for i = 1, #ARGV, 3 do
  local u, j = ARGV[i], ARGV[i + 1]
  if ARGV[i + 2] ~= '' and redis.call('GET', KEYS[17 + (i + 2) / 3]) ~= ARGV[i + 2] then return { 'ERROR', 'not_minted' } end
  local e = redis.call('ZSCORE', KEYS[3], j)
  local owner = redis.call('HGET', KEYS[4], u)
  if not e or owner ~= j then return { 'ERROR', 'not_found' } end
  js[#js + 1], us[#us + 1] = j, u
  z[#z + 1] = '1795176000000'; z[#z + 1] = 'C:' .. j
  journal('completed', i, u, j)
  out[#out + 1] = { 'COMPLETED', 1795176000000, 0 }
end
redis.call('ZREM', KEYS[3], unpack(js))
redis.call('HDEL', KEYS[4], unpack(us))
redis.call('ZADD', KEYS[10], unpack(z))
redis.call('HINCRBY', KEYS[9], 'completed', #js)
journal_flush()
return out`),
}

// runLimit runs op's limit script over n items in calls of k, from 64
// goroutines (as the op's loop), on es (enter: new users l1 … ln; status,
// exchange: es cycled; complete: es[i], each once, with its token's digest
// for complete-minted), and returns the Redis CPU per item in µs.
func runLimit(b *testing.B, rdb *redis.Client, room, op string, n, k int, es []*issuer.Entry, tokens []string) float64 {
	b.Helper()
	ctx := context.Background()
	s := limitScripts[strings.TrimSuffix(op, "-minted")]
	keys := issuer.RoomKeys(room)
	call := func(from, to int) error {
		var args []any
		ks := keys
		for i := from; i < to; i++ {
			switch op {
			case "enter":
				args = append(args, "l"+strconv.Itoa(i))
			case "status":
				args = append(args, es[i%len(es)].User)
			case "exchange":
				e := es[i%len(es)]
				args = append(args, e.User)
				ks = append(ks[:len(ks):len(ks)], issuer.MintedKey(room, e.AdmissionID))
			default:
				digest := ""
				if tokens != nil {
					digest = issuer.MintedDigest(tokens[i])
					ks = append(ks[:len(ks):len(ks)], issuer.MintedKey(room, es[i].AdmissionID))
				}
				args = append(args, es[i].User, es[i].AdmissionID, digest)
			}
		}
		r, err := s.Run(ctx, rdb, ks, args...).Slice()
		if err == nil && len(r) == 2 && r[0] == "ERROR" {
			err = fmt.Errorf("limit %s: %v", op, r[1])
		}
		return err
	}
	if err := s.Load(ctx, rdb).Err(); err != nil {
		b.Fatal(err)
	}
	cpu0 := redisCPU(b, rdb)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for {
				to := int(next.Add(int64(k)))
				from := to - k
				if from >= n {
					return
				}
				if err := call(from, min(to, n)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return float64((redisCPU(b, rdb) - cpu0).Nanoseconds()) / 1000 / float64(n)
}
