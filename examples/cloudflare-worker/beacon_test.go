package worker_test

// The room beacon at the edge (issue 34 §3 and §4): 10,000 simulated waiting
// pages poll through workerd running worker.js, in front of a real issuer
// (Redis, server.Server), first their status (every poll reaches the
// origin), then the room beacon, which the worker answers from its per-room
// cache. The counting proxy in front of the issuer counts what reached it.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/server"
	"github.com/flashgate/flashgate/verifier"
)

const (
	simPages    = 10_000          // simulated waiting pages
	simPoll     = 2 * time.Second // each page's poll interval (server.BeaconPoll)
	simWindow   = 3 * time.Second // each phase's length
	simConns    = 32              // real connections the pages share
	edgeCount   = 1               // edge locations: one workerd
	beaconTTLms = 1000            // the beacon's max-age (server.BeaconMaxAge)
)

// originCounts counts the requests that reached the issuer, by kind.
type originCounts struct{ beacon, status, other atomic.Int64 }

// TestBeaconAtTheEdge drives 10,000 simulated pages (distinct users and
// cookies over a few connections, bounded time, loopback only) through
// workerd and counts origin requests with and without the beacon. Budget:
// with the beacon, origin beacon requests ≤ 2 per beacon TTL per edge
// location (≤ 120 a minute for one workerd at max-age 1 s), whatever the
// number of pages; without it, every page poll is an origin request.
func TestBeaconAtTheEdge(t *testing.T) {
	ctx := context.Background()
	bin := workerdBinary(t)
	wasm := wasmModule(t)

	rdb := redistest.Client(t)
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	is, err := issuer.New(issuer.Config{Redis: rdb, Signer: ring, Issuer: tokenIssuer, Audience: tokenAudience,
		WaitingSecret: secret, Logger: quietLog, StatusSnapshot: time.Second})
	require.NoError(t, err)
	room := redistest.Room("beacon")
	_, err = is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1, RatePerMinute: 600, State: issuer.RoomPaused})
	require.NoError(t, err)
	type page struct {
		user, token string
		arrival     int64
	}
	pages := make([]page, simPages)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < simPages; i += 8 {
				u := "page-" + strconv.Itoa(i)
				e, err := is.Enter(ctx, room, u)
				if err != nil {
					t.Error(err)
					return
				}
				pages[i] = page{user: u, token: e.WaitingToken, arrival: e.Arrival}
			}
		}()
	}
	wg.Wait()
	require.False(t, t.Failed())

	srv, err := server.New(server.Options{Issuer: is, Keys: ring, Logger: quietLog, Beacon: server.BeaconAlways})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Listen(ln) }()
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(c)
	})
	target, _ := url.Parse("http://" + ln.Addr().String())
	proxy := httputil.NewSingleHostReverseProxy(target)
	var counts originCounts
	counting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/beacon"):
			counts.beacon.Add(1)
		case strings.HasSuffix(r.URL.Path, "/status"):
			counts.status.Add(1)
		default:
			counts.other.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(counting.Close)
	addr := strings.TrimPrefix(counting.URL, "http://")
	worker := startWorkerd(t, bin, wasm, addr, addr, "host")

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: simConns, MaxConnsPerHost: simConns}}
	t.Cleanup(client.CloseIdleConnections)
	get := func(path string, p page, status bool) (int, http.Header, []byte) {
		req, _ := http.NewRequest(http.MethodGet, worker+path, nil)
		req.Header.Set("Cookie", "fg_page="+p.user) // a distinct cookie per page: the beacon must not vary on it
		if status {
			req.Header.Set("X-User-ID", p.user)
			req.Header.Set("Authorization", "Bearer "+p.token)
		}
		res, err := client.Do(req)
		if err != nil {
			return 0, nil, nil
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header, b
	}
	v1 := "/v1/rooms/" + room

	// run polls as the pages do for simWindow: poll j is page j mod simPages's,
	// due at j × simPoll/simPages after the start; it returns the polls made
	// and how long the phase took.
	run := func(poll func(p page) bool) (polls int64, failed int64, took time.Duration) {
		var next, bad atomic.Int64
		start := time.Now()
		step := simPoll / simPages
		var wg sync.WaitGroup
		for range simConns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					j := next.Add(1) - 1
					due := start.Add(time.Duration(j) * step)
					if due.Sub(start) >= simWindow {
						return
					}
					time.Sleep(time.Until(due))
					if !poll(pages[j%simPages]) {
						bad.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		return next.Load() - simConns, bad.Load(), time.Since(start)
	}
	perMinute := func(n int64, d time.Duration) float64 { return float64(n) * float64(time.Minute) / float64(d) }

	// Without the beacon: every page polls its status through the worker.
	counts.status.Store(0)
	polls, failed, took := run(func(p page) bool {
		code, _, _ := get(v1+"/status", p, true)
		return code == http.StatusOK
	})
	require.Zero(t, failed)
	without := counts.status.Load()
	require.Equal(t, polls, without, "without the beacon every page poll reaches the origin")
	t.Logf("without the beacon: %d page polls in %v (%.0f/s; the pages' pace %d/s): %d origin status requests, %.0f a minute (at the pages' pace %d a minute)",
		polls, took.Round(time.Millisecond), float64(polls)/took.Seconds(), int(simPages/simPoll.Seconds()), without,
		perMinute(without, took), int(float64(simPages)*float64(time.Minute)/float64(simPoll)))

	// With the beacon: pages poll it and place themselves; those it places
	// near the head (or cannot place) ask their status.
	counts.beacon.Store(0)
	counts.status.Store(0)
	var hits, nearHead atomic.Int64
	var cacheControl atomic.Value
	var logOnce sync.Once
	polls, failed, took = run(func(p page) bool {
		code, h, body := get(v1+"/beacon", p, false)
		if code != http.StatusOK {
			logOnce.Do(func() { t.Logf("a beacon poll answered %d: %s", code, body) })
			return false
		}
		cacheControl.CompareAndSwap(nil, h.Get("Cache-Control"))
		if h.Get("X-Flashgate-Beacon") != "miss" {
			hits.Add(1)
		}
		var b verifier.Beacon
		parts := strings.Split(string(body), ".")
		if len(parts) != 3 {
			return false
		}
		raw, err := base64.RawURLEncoding.DecodeString(parts[1])
		if err != nil || json.Unmarshal(raw, &b) != nil {
			return false
		}
		if place, _, ok := b.Place(p.arrival); !ok || place <= b.NearHead {
			nearHead.Add(1)
			code, _, _ = get(v1+"/status", p, true)
			return code == http.StatusOK
		}
		return true
	})
	require.Zero(t, failed)
	withBeacon, withStatus := counts.beacon.Load(), counts.status.Load()
	windows := int64(math.Ceil(float64(took.Milliseconds()) / beaconTTLms))
	t.Logf("with the beacon: %d page polls in %v (%.0f/s), %d answered from the worker's cache; origin: %d beacon requests (%.0f a minute, budget %d a minute), %d status requests from the %d polls placed near the head",
		polls, took.Round(time.Millisecond), float64(polls)/took.Seconds(), hits.Load(), withBeacon, perMinute(withBeacon, took),
		2*edgeCount*60_000/beaconTTLms, withStatus, nearHead.Load())
	require.Equal(t, "public, max-age=1, stale-while-revalidate=2", cacheControl.Load())
	require.LessOrEqual(t, withBeacon, 2*edgeCount*windows, "origin beacon requests: at most 2 per TTL per edge location")
	require.GreaterOrEqual(t, withBeacon, int64(1))
	require.Equal(t, nearHead.Load(), withStatus, "only the pages near the head ask their status")
	require.Less(t, withStatus, polls/20, "near the head: a few percent of the pages at most")
	require.Less(t, float64(withBeacon+withStatus), float64(without)/20, "origin requests fall by more than 20×")
}
