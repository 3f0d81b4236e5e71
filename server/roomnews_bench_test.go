package server

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
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

// BenchmarkRoomNewsFanout holds N event streams of one open room (default
// config: no status snapshot) on one replica against a private
// redis-server (loopback), each stream's own poll 30 s apart, and reports
// (issue 34 §2):
//
//   - admin-ms-p50/p99/max: from an admin pause through the admin API of
//     this replica (which wakes the room's reader at once) to each stream's
//     event with room_state "paused";
//   - replica-ms-p50/p99/max: from an open made on the issuer directly (as
//     another replica's admin API would: seen at the room's next news read,
//     RoomNewsInterval) to each stream's event with room_state "open";
//   - redis-cmds/s: the commands the replica sends Redis (a go-redis hook)
//     while the streams are idle: the room's news reads, two commands each,
//     one per RoomNewsInterval, whatever N.
//
// FLASHGATE_NEWS_STREAMS sets the sizes (comma-separated; default
// 1000,5000); each stream costs two file descriptors here.
func BenchmarkRoomNewsFanout(b *testing.B) {
	sizes := []int{1000, 5000}
	if v := os.Getenv("FLASHGATE_NEWS_STREAMS"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 10 {
				b.Fatalf("FLASHGATE_NEWS_STREAMS: %q", v)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run("streams="+strconv.Itoa(n), func(b *testing.B) {
			for range b.N {
				benchNews(b, n)
			}
		})
	}
}

func benchNews(b *testing.B, n int) {
	rs := redistest.Start(b)
	rdb := rs.Client(b)
	cnt := &cmdCounter{}
	rdb.AddHook(cnt)
	e := newEnv(b, withRedis(rdb))
	e.srv.sseInterval = 30 * time.Second
	base := e.listen()
	ctx := context.Background()
	room := fmt.Sprintf("news-bench-%d", n)
	// Entered while paused, then opened: nobody is admitted (no ticker runs).
	if _, err := e.is.SetRoom(ctx, room, issuer.RoomConfig{State: issuer.RoomPaused}); err != nil {
		b.Fatal(err)
	}
	toks := make([]string, n)
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 64 {
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
	if _, err := e.is.SetState(ctx, room, issuer.RoomOpen); err != nil {
		b.Fatal(err)
	}

	// want is the room_state a stream waits for; seen[i] when it saw it.
	var want atomic.Pointer[string]
	seen := make([]atomic.Int64, n)
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
				if w := want.Load(); w != nil && strings.Contains(string(line), `"room_state":"`+*w+`"`) {
					seen[i].CompareAndSwap(0, time.Now().UnixNano())
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
	time.Sleep(2 * RoomNewsInterval) // the room's reader has read

	const window = 5 * time.Second
	c0 := cnt.n.Load()
	time.Sleep(window)
	cmds := cnt.n.Load() - c0

	// change makes the room's state s by call and returns the times (ms)
	// to each stream's event, sorted.
	change := func(s string, call func()) []float64 {
		for i := range seen {
			seen[i].Store(0)
		}
		want.Store(&s)
		t0 := time.Now().UnixNano()
		call()
		var lat []float64
		for wait := time.Now().Add(20 * time.Second); time.Now().Before(wait); time.Sleep(10 * time.Millisecond) {
			lat = lat[:0]
			for i := range seen {
				if v := seen[i].Load(); v != 0 {
					lat = append(lat, float64(max(v-t0, 0))/1e6)
				}
			}
			if len(lat) == n {
				break
			}
		}
		if len(lat) < n {
			b.Fatalf("%s: %d of %d streams saw it", s, len(lat), n)
		}
		slices.Sort(lat)
		return lat
	}
	admin := change("paused", func() {
		r := e.do(req{method: "POST", path: "/admin/rooms/" + room + "/pause", bearer: adminToken, body: "{}"})
		if r.status != 200 {
			b.Fatalf("pause: %d %s", r.status, r.body)
		}
	})
	replica := change("open", func() {
		if _, err := e.is.SetState(ctx, room, issuer.RoomOpen); err != nil {
			b.Fatal(err)
		}
	})

	for _, c := range conns {
		_ = c.Close()
	}
	pct := func(l []float64, p float64) float64 { return l[min(len(l)-1, int(p*float64(len(l))))] }
	b.ReportMetric(pct(admin, 0.5), "admin-ms-p50")
	b.ReportMetric(pct(admin, 0.99), "admin-ms-p99")
	b.ReportMetric(admin[n-1], "admin-ms-max")
	b.ReportMetric(pct(replica, 0.5), "replica-ms-p50")
	b.ReportMetric(pct(replica, 0.99), "replica-ms-p99")
	b.ReportMetric(replica[n-1], "replica-ms-max")
	b.ReportMetric(float64(cmds)/window.Seconds(), "redis-cmds/s")
}
