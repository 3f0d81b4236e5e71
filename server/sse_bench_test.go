package server

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
)

// BenchmarkSSEStreams holds N concurrent event streams of one room (default
// policy: 600 admissions a minute, so all but the first 60 are answered from
// the room snapshot) open on
// one replica against a private redis-server (loopback) and reports:
//
//   - B/stream: the server's memory per open stream — Go heap + goroutine
//     stacks after a GC, minus the same number of bare client connections
//     (the clients live in this process too); rss-B/stream: the process's
//     RSS growth per stream, clients included;
//   - redis-cmds/s: Redis commands per second (INFO commandstats, which
//     also counts the commands inside scripts) while every stream polls
//     once a second (the floor of poll_after: polls/s = streams);
//     redis-scripts/s: the script calls among them;
//   - latency-ms-p50/max: from an admission (Tick returned) to the
//     admitted users' ACTIVE events;
//   - goroutines/stream: the server's goroutines per open stream (the
//     clients' readers subtracted).
//
// Each size runs once under `make bench` (a run, timed whole as ns/op, takes
// longer than BENCHTIME: the Redis window alone is 5 s). FLASHGATE_SSE_STREAMS sets the
// sizes (comma-separated; default 2000,5000): every stream costs two file
// descriptors here, so 10,000 needs RLIMIT_NOFILE above 20,000.
func BenchmarkSSEStreams(b *testing.B) {
	sizes := []int{2000, 5000}
	if v := os.Getenv("FLASHGATE_SSE_STREAMS"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 100 {
				b.Fatalf("FLASHGATE_SSE_STREAMS: %q", v)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run("streams="+strconv.Itoa(n), func(b *testing.B) {
			for range b.N {
				benchSSE(b, n)
			}
		})
	}
}

const benchAdmit = 50 // users admitted by the latency tick

func liveBytes() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

// clientCost is the memory of n bare client connections like the
// benchmark's (a goroutine blocked reading through a 1 KiB bufio.Reader).
func clientCost(b *testing.B, n int) uint64 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	acc := make(chan struct{})
	go func() {
		defer close(acc)
		for range n {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	before := liveBytes()
	var wg sync.WaitGroup
	conns := make([]net.Conn, n)
	for i := range n {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		conns[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = bufio.NewReaderSize(c, 1024).ReadByte()
		}()
	}
	<-acc
	after := liveBytes()
	for _, c := range conns {
		_ = c.Close()
	}
	wg.Wait()
	for _, c := range held {
		_ = c.Close()
	}
	return after - before
}

// redisCalls sums INFO commandstats: all commands, and the script calls
// (EVALSHA/EVAL) alone; commandstats also counts the commands scripts run.
func redisCalls(b *testing.B, srv *redistest.Server) (all, scripts int64) {
	out, err := srv.Client(b).Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "cmdstat_") || strings.HasPrefix(line, "cmdstat_info:") {
			continue
		}
		if i := strings.Index(line, "calls="); i >= 0 {
			v := line[i+len("calls="):]
			v = v[:strings.IndexByte(v, ',')]
			c, _ := strconv.ParseInt(v, 10, 64)
			all += c
			if strings.HasPrefix(line, "cmdstat_eval") {
				scripts += c
			}
		}
	}
	return all, scripts
}

func benchSSE(b *testing.B, n int) {
	ctrl := clientCost(b, n)
	rs := redistest.Start(b)
	// The status snapshot on, as docs/performance.md#measurements measured it (the opt-in
	// for lines this large; without it every poll runs the status script).
	e := newEnv(b, withRedis(rs.Client(b)), withIssuer(func(c *issuer.Config) { c.StatusSnapshot = issuer.SuggestedStatusSnapshot }))
	e.srv.sseInterval = time.Second
	base := e.listen()
	ctx := context.Background()
	room := fmt.Sprintf("sse-bench-%d", n)
	_, err := e.is.SetRoom(ctx, room, issuer.RoomConfig{State: issuer.RoomPaused, Capacity: benchAdmit})
	if err != nil {
		b.Fatal(err)
	}
	toks := make([]string, n)
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 64 { // coalesced enters; arrival order = index order only roughly
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				en, err := e.is.Enter(ctx, room, "u"+strconv.Itoa(i))
				if err != nil {
					b.Error(err)
					return
				}
				toks[i] = en.WaitingToken
			}
		}()
	}
	wg.Wait()

	before, rss0, g0 := liveBytes(), rssBytes(), runtime.NumGoroutine()
	active := make([]atomic.Int64, n) // unix ns of the ACTIVE event
	opened := make(chan struct{}, n)
	conns := make([]net.Conn, n)
	addr := strings.TrimPrefix(base, "http://")
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatalf("stream %d: %v", i, err)
		}
		conns[i] = c
		fmt.Fprintf(c, "GET /v1/rooms/%s/events?waiting_token=%s HTTP/1.1\r\nHost: x\r\nX-User-ID: u%d\r\n\r\n", room, toks[i], i)
		go func() {
			br := bufio.NewReaderSize(c, 1024)
			first := true
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					return
				}
				if !strings.HasPrefix(string(line), "data: ") {
					continue
				}
				if first {
					first = false
					opened <- struct{}{}
				}
				if strings.Contains(string(line), `"state":"ACTIVE"`) {
					active[i].Store(time.Now().UnixNano())
				}
			}
		}()
	}
	deadline := time.After(2 * time.Minute)
	for range n {
		select {
		case <-opened:
		case <-deadline:
			b.Fatalf("streams did not all start (gauge %v)", gaugeValue(e.srv.m.sseOpen))
		}
	}
	after, rss1, g1 := liveBytes(), rssBytes(), runtime.NumGoroutine()
	if g := gaugeValue(e.srv.m.sseOpen); g != float64(n) {
		b.Fatalf("gauge %v, want %d", g, n)
	}

	// Redis commands per second with every stream polling once a second.
	const window = 5 * time.Second
	c0, s0 := redisCalls(b, rs)
	time.Sleep(window)
	c1, s1 := redisCalls(b, rs)
	calls, scripts := c1-c0-1, s1-s0 // -1: the first INFO

	// Admission → ACTIVE event.
	if _, err := e.is.SetState(ctx, room, issuer.RoomOpen); err != nil {
		b.Fatal(err)
	}
	tr, err := e.is.Tick(ctx, room)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now().UnixNano()
	var lat []float64
	wait := time.Now().Add(10 * time.Second)
	for time.Now().Before(wait) {
		lat = lat[:0]
		for i := range active {
			if v := active[i].Load(); v != 0 {
				lat = append(lat, float64(max(v-t0, 0))/1e6)
			}
		}
		if len(lat) >= tr.Admitted {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if tr.Admitted == 0 || len(lat) < tr.Admitted {
		b.Fatalf("admitted %d, ACTIVE events %d", tr.Admitted, len(lat))
	}
	slices.Sort(lat)

	for _, c := range conns {
		_ = c.Close()
	}
	deadline = time.After(30 * time.Second)
	for gaugeValue(e.srv.m.sseOpen) != 0 {
		select {
		case <-deadline:
			b.Fatalf("gauge stuck at %v after the clients closed", gaugeValue(e.srv.m.sseOpen))
		case <-time.After(10 * time.Millisecond):
		}
	}
	total := int64(after) - int64(before)
	b.ReportMetric(float64(total-int64(ctrl))/float64(n), "B/stream")
	b.ReportMetric(float64(int64(rss1)-int64(rss0))/float64(n), "rss-B/stream")
	b.ReportMetric(float64(calls)/window.Seconds(), "redis-cmds/s")
	b.ReportMetric(float64(scripts)/window.Seconds(), "redis-scripts/s")
	b.ReportMetric(float64(n), "polls/s")
	b.ReportMetric(lat[len(lat)/2], "latency-ms-p50")
	b.ReportMetric(lat[len(lat)-1], "latency-ms-max")
	b.ReportMetric(float64(ctrl)/float64(n), "client-B/conn")
	b.ReportMetric(float64(g1-g0-n)/float64(n), "goroutines/stream") // less each client's reader
}
