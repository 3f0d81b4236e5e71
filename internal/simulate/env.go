package simulate

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/roomkey"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/journal"
	"github.com/flashgate/flashgate/journal/consumer"
	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/order"
	"github.com/flashgate/flashgate/server"
	"github.com/flashgate/flashgate/verifier"
	"github.com/flashgate/flashgate/verifier/remote"
)

// env is the servers of one run and how to stop them.
type env struct {
	base     string // issuer base URL
	admin    string // admin token
	store    string // what holds the queue, for the report
	complete order.Completer

	// completedAt records the server-reported completion time (ms) of every
	// admission the order service completed, by jti.
	mu          sync.Mutex
	completedAt map[string]int64

	orderStats func() orderStats

	closers []func() // run in reverse order

	// The journal (Options.Journal): its store, the Redis its consumer reads.
	journal *journal.Store
	// jmetrics holds the journal process's metrics (what its /metrics shows).
	jmetrics *prometheus.Registry
	jrdb     redis.UniversalClient
}

func (e *env) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
}

func (e *env) recordCompletion(jti string, at time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.completedAt[jti]; !ok {
		e.completedAt[jti] = at.UnixMilli()
	}
}

func (e *env) completion(jti string) (int64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ms, ok := e.completedAt[jti]
	return ms, ok
}

// setup starts (or connects to) the issuer.
func setup(ctx context.Context, o *Options, hc *http.Client) (_ *env, err error) {
	e := &env{completedAt: map[string]int64{}}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	rdb := o.Redis
	if o.IssuerURL != "" {
		e.base, e.admin = strings.TrimRight(o.IssuerURL, "/"), o.AdminToken
		e.store = "issuer at " + e.base
		if rdb != nil {
			// Completions the Go way: straight to Redis.
			c, err := order.NewRedis(rdb, nil)
			if err != nil {
				return nil, err
			}
			e.complete = c
			e.store += " + " + o.storeName("redis")
		} else {
			c, err := order.NewHTTP(e.base, &order.HTTPConfig{Client: hc})
			if err != nil {
				return nil, err
			}
			e.complete = c
		}
		return e, nil
	}

	if rdb == nil {
		m := miniredis.NewMiniRedis()
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("simulate: start embedded redis: %w", err)
		}
		e.closers = append(e.closers, m.Close)
		c := redis.NewClient(&redis.Options{Addr: m.Addr(), PoolSize: 64})
		e.closers = append(e.closers, func() { _ = c.Close() })
		rdb = c
		e.store = "embedded miniredis (in memory)"
	} else {
		e.store = o.storeName("redis")
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("simulate: redis: %w", err)
	}
	ring, err := keys.Generate(time.Now())
	if err != nil {
		return nil, err
	}
	secret, err := issuer.LoadOrCreateSecret(ctx, rdb)
	if err != nil {
		return nil, fmt.Errorf("simulate: waiting-token secret: %w", err)
	}
	// The rooms write a journal only when a journal process reads it
	// (Options.Journal): unread, it would only fill the store.
	journalMax := int64(issuer.NoJournal)
	if o.Journal != "" {
		journalMax = 0 // the default bound
	}
	is, err := issuer.New(issuer.Config{Redis: rdb, Signer: ring, Issuer: o.TokenIssuer, Audience: o.Audience,
		WaitingSecret: secret, SharedSecret: true, Logger: o.Logger, JournalMaxLen: journalMax})
	if err != nil {
		return nil, err
	}
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	e.admin = hex.EncodeToString(tok[:])
	srv, err := server.New(server.Options{Issuer: is, Keys: ring,
		AdminToken: e.admin, UserHeader: o.UserHeader, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e.base = "http://" + ln.Addr().String()
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Listen(ln); err != nil {
			o.Logger.Warn("simulate: issuer server stopped", "err", err)
		}
	}()
	e.closers = append(e.closers, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-served
	})
	tickCtx, stopTick := context.WithCancel(context.WithoutCancel(ctx))
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		_ = is.Run(tickCtx)
	}()
	e.closers = append(e.closers, func() { stopTick(); <-ticked })
	if o.Journal != "" {
		if err := e.startJournal(ctx, o, rdb); err != nil {
			return nil, err
		}
	}
	if e.complete, err = order.NewRedis(rdb, nil); err != nil {
		return nil, err
	}
	return e, nil
}

func (o *Options) storeName(def string) string {
	if o.StoreName != "" {
		return o.StoreName
	}
	return def
}

// startOrderService starts the order service on a loopback port, with keys
// fetched from the issuer's JWKS, and returns its base URL.
func (e *env) startOrderService(ctx context.Context, o *Options, hc *http.Client) (string, error) {
	kctx, stopKeys := context.WithCancel(context.WithoutCancel(ctx))
	e.closers = append(e.closers, stopKeys)
	ks, err := remote.New(kctx, e.base+"/.well-known/jwks.json", &remote.Config{HTTPClient: hc, Logger: o.Logger})
	if err != nil {
		return "", err
	}
	v, err := verifier.New(ks, verifier.Config{Issuer: o.TokenIssuer, Audience: o.Audience})
	if err != nil {
		return "", err
	}
	svc := newOrders(v, recording{e}, o.UserHeader, o.Logger)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	hs := &http.Server{Handler: svc, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = hs.Serve(ln)
	}()
	e.closers = append(e.closers, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		<-served
	})
	e.orderStats = svc.stats
	return "http://" + ln.Addr().String(), nil
}

// configureRoom creates or updates the room through the admin API.
func (s *sim) configureRoom(ctx context.Context) error {
	opens := "" // open from the start
	if s.o.OpensIn > 0 {
		opens = time.Now().Add(s.o.OpensIn).UTC().Format(time.RFC3339Nano)
	}
	body, _ := json.Marshal(map[string]any{
		"capacity":          s.o.Capacity,
		"rate_per_minute":   s.o.RatePerMinute,
		"session_ms":        s.o.SessionDuration.Milliseconds(),
		"tick_ms":           s.o.Tick.Milliseconds(),
		"arrival_window_ms": max(0, s.o.ArrivalWindow.Milliseconds()),
		"state":             "open",
		"pre_queue":         s.o.PreQueue,
		"opens_at":          opens,
	})
	status, raw, err := s.adminDo(ctx, http.MethodPut, "/admin/rooms/"+s.o.Room, body)
	if err != nil {
		return fmt.Errorf("simulate: configure room: %w", err)
	}
	if status/100 != 2 {
		return fmt.Errorf("simulate: configure room: issuer answered %d: %s", status, bytes.TrimSpace(raw))
	}
	return nil
}

// signInvites signs, through the admin API, one single-use invite for every
// buyer given a lane (cast), in calls of at most issuer.MaxInvites.
func (s *sim) signInvites(ctx context.Context, buyers []*buyer) error {
	for _, lane := range []string{flashgate.LanePriority, flashgate.LaneBypass} {
		var holders []*buyer
		for _, b := range buyers {
			if b.inviteLane == lane {
				holders = append(holders, b)
			}
		}
		for len(holders) > 0 {
			n := min(len(holders), issuer.MaxInvites)
			body, _ := json.Marshal(map[string]any{"lane": lane, "single_use": true, "count": n,
				"ttl_ms": (s.o.Timeout + time.Hour).Milliseconds()})
			status, raw, err := s.adminDo(ctx, http.MethodPost, "/admin/rooms/"+s.o.Room+"/invites", body)
			if err != nil {
				return fmt.Errorf("simulate: sign invites: %w", err)
			}
			var out server.InvitesResponse
			if status != http.StatusOK || json.Unmarshal(raw, &out) != nil || len(out.Invites) != n {
				return fmt.Errorf("simulate: sign invites: issuer answered %d: %s", status, bytes.TrimSpace(raw))
			}
			for i, inv := range out.Invites {
				holders[i].invite = inv.Token
			}
			holders = holders[n:]
		}
	}
	return nil
}

// stats reads the room's counters through the admin API.
func (s *sim) stats(ctx context.Context) (*server.Stats, error) {
	status, raw, err := s.adminDo(ctx, http.MethodGet, "/admin/rooms/"+s.o.Room+"/stats", nil)
	if err != nil {
		return nil, fmt.Errorf("simulate: room stats: %w", err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("simulate: room stats: issuer answered %d: %s", status, bytes.TrimSpace(raw))
	}
	var st server.Stats
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("simulate: room stats: %w", err)
	}
	return &st, nil
}

func (s *sim) adminDo(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.env.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.env.admin)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, err
	}
	if resp.StatusCode == http.StatusNotFound && bytes.Contains(raw, []byte("unknown-route")) {
		return 0, nil, errors.New("the issuer's admin API is disabled (no admin token configured)")
	}
	return resp.StatusCode, raw, nil
}

// recording is the order service's Completer: e.complete, recording the
// completion time the queue reports.
type recording struct{ e *env }

func (r recording) Complete(ctx context.Context, t *verifier.Token) (*flashgate.Completion, error) {
	c, err := r.e.complete.Complete(ctx, t)
	if err == nil {
		r.e.recordCompletion(t.ID, c.CompletedAt)
	}
	return c, err
}

// startJournal migrates the journal at o.Journal and runs a journal
// consumer over rdb until the run ends (Options.Journal).
func (e *env) startJournal(ctx context.Context, o *Options, rdb redis.UniversalClient) error {
	if err := journal.Migrate(ctx, o.Journal); err != nil {
		return fmt.Errorf("simulate: journal: %w", err)
	}
	store, err := journal.Open(ctx, o.Journal)
	if err != nil {
		return fmt.Errorf("simulate: journal: %w", err)
	}
	e.closers = append(e.closers, store.Close)
	e.jmetrics = prometheus.NewRegistry()
	c, err := consumer.New(consumer.Config{Redis: rdb, Store: store, Logger: o.Logger, Idle: 20 * time.Millisecond,
		Metrics: consumer.NewMetrics(e.jmetrics)})
	if err != nil {
		return err
	}
	jctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(jctx) }()
	e.closers = append(e.closers, func() { stop(); <-done })
	e.journal, e.jrdb = store, rdb
	return nil
}

// journalCounter sums the journal process's series of counter name (0
// when it has none: the must-be-0 counters appear when they first move).
func (e *env) journalCounter(name string) float64 {
	mfs, err := e.jmetrics.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// journalReport waits (up to 30 s) until the consumer has written every
// event of room's stream, then reads the journal's report of the room's
// current epoch.
func (e *env) journalReport(ctx context.Context, room string) (*journal.Report, time.Duration, error) {
	began := time.Now()
	key := consumer.StreamKey(room)
	for {
		// Caught up: nothing pending, and the group has been handed the
		// stream's newest entry (not XINFO's lag, which miniredis counts
		// differently).
		g, err := e.jrdb.XInfoGroups(ctx, key).Result()
		var last []redis.XMessage
		if err == nil {
			last, err = e.jrdb.XRevRangeN(ctx, key, "+", "-", 1).Result()
		}
		if err == nil && len(g) == 1 && g[0].Pending == 0 && len(last) == 1 && g[0].LastDeliveredID == last[0].ID {
			break
		}
		if time.Since(began) > 30*time.Second {
			return nil, 0, fmt.Errorf("journal: not caught up after 30 s (%v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	caught := time.Since(began)
	// This run's epoch only: the journal may hold earlier runs of the room
	// (each embedded store starts the room afresh, with a new epoch).
	epoch, err := e.jrdb.HGet(ctx, roomkey.Key(room, roomkey.Config), "epoch").Result()
	if err != nil {
		return nil, 0, fmt.Errorf("journal: the room's epoch: %w", err)
	}
	rep, err := e.journal.Report(ctx, room, epoch)
	return &rep, caught, err
}
