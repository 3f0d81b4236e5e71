package faults_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/simulate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/problem"
)

// traffic is HTTP load from a few goroutines (enter, then status with the
// waiting token) and a /healthz prober, with every answer classified.
type traffic struct {
	mu       sync.Mutex
	ok       int      // 200
	down     int      // 503 unavailable, well-formed
	gone     int      // 404 unknown-room (the room vanished with the data)
	bad      []string // anything else: 500s, malformed 503s, transport errors
	health   int      // /healthz probes
	sick     []string // /healthz answers other than 200
	stop     chan struct{}
	wg       sync.WaitGroup
	userSeqs atomic.Int64
}

func (tr *traffic) record(a answer) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	switch {
	case a.Err == nil && a.status == http.StatusOK:
		tr.ok++
	case isUnavailable(a):
		tr.down++
	case a.Err == nil && a.status == http.StatusNotFound && a.Code == string(flashgate.CodeUnknownRoom):
		tr.gone++
	default:
		if len(tr.bad) < 20 {
			tr.bad = append(tr.bad, a.String())
		}
	}
}

func (tr *traffic) counts() (ok, down int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.ok, tr.down
}

func startTraffic(base, room string, workers int) *traffic {
	tr := &traffic{stop: make(chan struct{})}
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16}}
	for g := range workers {
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			for {
				select {
				case <-tr.stop:
					return
				default:
				}
				user := fmt.Sprintf("t%d-%d", g, tr.userSeqs.Add(1))
				a := do(hc, http.MethodPost, base+"/v1/rooms/"+room+"/enter", user, "")
				tr.record(a)
				if a.status == http.StatusOK && a.WaitingToken != "" {
					tr.record(do(hc, http.MethodGet, base+"/v1/rooms/"+room+"/status", user, a.WaitingToken))
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	tr.wg.Add(1)
	go func() {
		defer tr.wg.Done()
		for {
			select {
			case <-tr.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			a := do(hc, http.MethodGet, base+"/healthz", "", "")
			tr.mu.Lock()
			tr.health++
			if a.Err != nil || a.status != http.StatusOK {
				tr.sick = append(tr.sick, a.String())
			}
			tr.mu.Unlock()
		}
	}()
	return tr
}

func (tr *traffic) halt() { close(tr.stop); tr.wg.Wait() }

// TestRedisKilledAndRestarted SIGKILLs the issuer's redis-server while HTTP
// clients enter and poll, then restarts it empty (persistence is off).
//
// During the outage every Redis-backed answer must be 503
// application/problem+json, type …/unavailable, with Retry-After — never a
// 500 (what an unmapped go-redis error or a recovered panic gives) — and
// /readyz must say 503 while /healthz stays 200 (a liveness probe that
// followed Redis would make Kubernetes restart every replica during a Redis
// outage). After the restart the issuer must recover without help: /readyz
// 200, enter works (scripts reloaded into the empty script cache, pool
// connections replaced), and the tick loop that lived through the outage
// admits a fresh room's line with FIFO and capacity intact — a Run loop
// that gave up on errors would leave that run waiting until its timeout.
func TestRedisKilledAndRestarted(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ring := newRing(t)
	is, err := issuer.New(issuer.Config{Redis: rdb, Signer: ring, WaitingSecret: secret, Logger: quiet,
		DefaultRoom: &issuer.RoomConfig{Capacity: 5, Tick: 100 * time.Millisecond}})
	require.NoError(t, err)
	const admin = "fault-admin"
	base := serve(t, is, ring, admin)
	runTicks(t, is)
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: nil}}

	room := redistest.Room("kill")
	tr := startTraffic(base, room, 4)
	stopped := false
	defer func() {
		if !stopped {
			tr.halt()
		}
	}()
	eventually(t, 20*time.Second, "traffic before the crash", func() bool { ok, _ := tr.counts(); return ok >= 20 })
	require.Equal(t, http.StatusOK, do(hc, http.MethodGet, base+"/readyz", "", "").status)

	// A waiting token from before the crash, to poll during the outage.
	pre := do(hc, http.MethodPost, base+"/v1/rooms/"+room+"/enter", "pre-crash", "")
	require.Equal(t, http.StatusOK, pre.status, pre.String())

	srv.Kill()

	var enter, status, ready answer
	eventually(t, 20*time.Second, "503 unavailable from enter and status, 503 from /readyz", func() bool {
		enter = do(hc, http.MethodPost, base+"/v1/rooms/"+room+"/enter", "during-outage", "")
		status = do(hc, http.MethodGet, base+"/v1/rooms/"+room+"/status", "pre-crash", pre.WaitingToken)
		ready = do(hc, http.MethodGet, base+"/readyz", "", "")
		return enter.status == http.StatusServiceUnavailable && status.status == http.StatusServiceUnavailable &&
			ready.status == http.StatusServiceUnavailable
	})
	assert.True(t, isUnavailable(enter), "enter during the outage: %s", enter)
	assert.Equal(t, "1", enter.retryAfter)
	assert.True(t, isUnavailable(status), "status during the outage: %s", status)
	assert.Equal(t, "application/problem+json", ready.contentType, "readyz: %s", ready)
	assert.Equal(t, problem.Base+"not-ready", ready.Type, "readyz: %s", ready)
	assert.NotEmpty(t, ready.retryAfter, "readyz: %s", ready)
	// Let the clients run into the outage for a while.
	eventually(t, 20*time.Second, "the clients' traffic to meet the outage", func() bool {
		_, down := tr.counts()
		return down >= 20
	})

	require.NoError(t, srv.Restart())
	eventually(t, 30*time.Second, "/readyz 200 after the restart", func() bool {
		return do(hc, http.MethodGet, base+"/readyz", "", "").status == http.StatusOK
	})
	var after answer
	eventually(t, 30*time.Second, "enter to work after the restart", func() bool {
		after = do(hc, http.MethodPost, base+"/v1/rooms/"+room+"/enter", "after-restart", "")
		return after.status == http.StatusOK
	})
	assert.NotEmpty(t, after.WaitingToken+after.State)
	okBefore, _ := tr.counts()
	eventually(t, 20*time.Second, "the clients' traffic to succeed again", func() bool {
		ok, _ := tr.counts()
		return ok >= okBefore+20
	})
	tr.halt()
	stopped = true

	tr.mu.Lock()
	t.Logf("traffic: %d ok, %d unavailable, %d unknown-room; %d health probes", tr.ok, tr.down, tr.gone, tr.health)
	assert.Empty(t, tr.bad, "every answer is 200, 503 unavailable (with Retry-After), or 404 unknown-room after the data loss")
	assert.Empty(t, tr.sick, "/healthz stays 200 throughout")
	assert.Positive(t, tr.health)
	tr.mu.Unlock()

	// The tick loop lived through the outage: a fresh room's sale, with
	// the capacity binding, admits everyone in order.
	o := simulate.Options{
		Users: 100, Capacity: 10, RatePerMinute: 6000, SessionDuration: 30 * time.Second, Tick: 100 * time.Millisecond,
		Think: 50 * time.Millisecond, Abandon: -1, BadActors: -1, PollScale: 0.2, Timeout: 40 * time.Second,
		Seed: 3, IssuerURL: base, AdminToken: admin, Room: redistest.Room("after"),
	}
	r, err := simulate.Run(context.Background(), o)
	require.NoError(t, err)
	var text bytes.Buffer
	require.NoError(t, r.WriteText(&text))
	t.Logf("\n%s", text.String())
	assert.Zero(t, r.Errors, "errors: %v", r.ErrorSamples)
	assert.False(t, r.TimedOut)
	assert.Zero(t, r.FIFOViolations)
	peakOK(t, r)
	assert.Equal(t, o.Users, r.Completed)
	assert.Less(t, r.FastTrack, o.Users, "the line formed: the tick loop admitted the rest")
}
