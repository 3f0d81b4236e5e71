// Package simulate drives a whole flash sale through flashgate over real
// HTTP: an issuer (in-process, or an existing one), an order service that
// verifies admission tokens offline (orders.go, on the order package: what
// examples/orderservice shows, without linking the example), and many
// concurrent buyers that enter the waiting room, poll their status,
// exchange their waiting token for an admission token, shop for a while
// and place an order. Some buyers abandon their admission; some misbehave
// (a tampered token, a token for another product, a replay after their
// order). The Report checks the invariants of docs/concepts.md#invariants from what the
// servers reported: FIFO admission order, live admissions vs capacity,
// admissions per minute vs rate, no double admission, no forged token
// accepted, no order completed twice.
package simulate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/server"
)

// Options configures Run. Zero values take the documented defaults.
type Options struct {
	// Users is how many buyers take part (default 10000).
	Users int
	// Capacity is the room's total active users (default 100).
	Capacity int
	// RatePerMinute is the room's new users per minute (default 6000).
	RatePerMinute int
	// SessionDuration is the admission's lifetime, whole seconds (default 30s).
	SessionDuration time.Duration
	// Tick is the room's admission step period, 100ms…1m (default 200ms).
	Tick time.Duration
	// Think is the mean time a buyer shops between admission and order;
	// each buyer draws uniformly from [0, 2×Think] (default 1s; negative: 0).
	Think time.Duration
	// Abandon is the fraction of buyers who never order: their admission
	// expires (default 0.02; negative: none).
	Abandon float64
	// TabClose is the fraction of buyers who close the tab while waiting:
	// they enter and then never ask again — no status, no exchange, no leave
	// (the courtesy beacon lost). Their admission holds a slot until the
	// room's arrival window ends it, or the whole session without one
	// (Report.IdleSlotSeconds). Default 0: none.
	TabClose float64
	// ArrivalWindow is the room's arrival window (default 60 s; negative:
	// off). It has no effect unless shorter than SessionDuration.
	ArrivalWindow time.Duration
	// PreQueue is the room's pre-queue order: "fifo" (default) or
	// "shuffle" (the lottery at opening; docs/rooms.md#pre-queue-lottery).
	PreQueue string
	// OpensIn opens the room this long after the run starts (the event
	// window's opens_at): buyers who arrive before it form the pre-queue.
	// Default 0: the room is open from the start.
	OpensIn time.Duration
	// SoldOutAfter, when positive, declares the sale sold out (POST
	// /admin/rooms/{room}/sold-out) as soon as that many orders went
	// through: every buyer still waiting must end CLOSED (reason sold_out),
	// and later enters are refused (room_closed). The report says how many
	// and how fast (Report.SoldOut). Zero: never.
	SoldOutAfter int
	// PriorityShare is the fraction of buyers holding a priority invite
	// (docs/rooms.md#priority-lanes-and-invites): they enter the room's priority
	// lane, admitted before the public line. BypassShare is the fraction
	// holding a bypass invite (admitted at once when capacity and rate
	// allow, else the priority lane). Both default 0; the invites are
	// single use, signed through the admin API before the sale; a buyer
	// who queues again after losing an admission queues publicly.
	PriorityShare, BypassShare float64
	// BadActors is the fraction of buyers who first present a tampered
	// token and a token for another product, and replay their token after
	// their order (default 0.02; negative: none).
	BadActors float64
	// Room is the waiting room (product) id (default "flash-sale").
	Room string
	// PollScale multiplies the poll_after_ms the issuer asks for (default 1;
	// smaller values make short runs quicker and the waits more precise).
	PollScale float64
	// Ramp spreads the arrivals evenly over this duration (default 0: every
	// buyer presses "buy" at once).
	Ramp time.Duration
	// Timeout bounds the whole run (default 5m).
	Timeout time.Duration
	// Journal, when set, is a PostgreSQL URL (pgx DSN): the run also runs
	// the journal process in-process (journal/consumer, as `flashgate
	// journal run` does) next to the in-process issuer, waits at the end
	// until it has written every event, and reports what the journal holds
	// for the room (Report.Journal), checked against the run. The schema
	// is migrated first. Not with IssuerURL. Without it the in-process
	// issuer's rooms write no journal (issuer.Config.JournalMaxLen < 0).
	Journal string
	// RetryFor is how long one buyer's call is retried while it fails in
	// transit or answers 502/503/504/429 (backoff from 50 ms, doubling up to
	// 2 s; default 10 s: the 6 tries it replaced slept 3 s, plus up to a
	// second per try waiting for an answer under load). A sale through a
	// Redis restart and `flashgate restore` (503 unavailable, then
	// room_lost) needs it longer than the outage, as a real client retries.
	RetryFor time.Duration
	// MaxConns bounds the HTTP connections to each server (default 256).
	MaxConns int
	// Seed makes the choice of abandoners, bad actors and think times
	// reproducible; 0 picks a random seed.
	Seed uint64

	// Redis is the queue store of the in-process issuer. Nil: an embedded
	// in-process Redis (miniredis), fresh for this run.
	Redis redis.UniversalClient
	// StoreName describes Redis for the report (e.g. a redacted URL).
	StoreName string

	// IssuerURL, when set, uses a running issuer instead of starting one;
	// AdminToken is its admin token (required, to configure the room and
	// read its stats). Completions then go through Redis when Redis is set
	// (order.Redis), else through the issuer's /v1/complete (order.HTTP).
	IssuerURL  string
	AdminToken string
	// TokenIssuer and Audience are the admission tokens' iss and aud
	// (defaults "flashgate", "orders").
	TokenIssuer, Audience string
	// UserHeader is the issuer's trusted user header (default "X-User-ID").
	UserHeader string

	// Progress, when set, receives one progress line per second.
	Progress io.Writer
	// Logger receives the in-process servers' logs; nil discards them.
	Logger *slog.Logger
}

func (o *Options) defaults() error {
	if o.Users == 0 {
		o.Users = 10000
	}
	if o.Capacity == 0 {
		o.Capacity = 100
	}
	if o.RatePerMinute == 0 {
		o.RatePerMinute = 6000
	}
	if o.SessionDuration == 0 {
		o.SessionDuration = 30 * time.Second
	}
	if o.Tick == 0 {
		o.Tick = 200 * time.Millisecond
	}
	if o.Think == 0 {
		o.Think = time.Second
	}
	o.Think = max(o.Think, 0)
	if o.Abandon == 0 {
		o.Abandon = 0.02
	}
	o.Abandon = max(o.Abandon, 0)
	o.TabClose = max(o.TabClose, 0)
	if o.ArrivalWindow == 0 {
		o.ArrivalWindow = issuer.DefaultArrivalWindow
	}
	if o.BadActors == 0 {
		o.BadActors = 0.02
	}
	if o.PreQueue == "" {
		o.PreQueue = string(issuer.PreQueueFIFO)
	}
	o.BadActors = max(o.BadActors, 0)
	if o.Room == "" {
		o.Room = "flash-sale"
	}
	if o.PollScale == 0 {
		o.PollScale = 1
	}
	if o.RetryFor == 0 {
		o.RetryFor = 10 * time.Second
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.MaxConns == 0 {
		o.MaxConns = 256
	}
	if o.TokenIssuer == "" {
		o.TokenIssuer = "flashgate"
	}
	if o.Audience == "" {
		o.Audience = "orders"
	}
	if o.UserHeader == "" {
		o.UserHeader = "X-User-ID"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	switch {
	case o.Users < 1:
		return fmt.Errorf("simulate: users must be positive, got %d", o.Users)
	case o.Capacity < 1:
		return fmt.Errorf("simulate: capacity must be positive, got %d", o.Capacity)
	case o.RatePerMinute < 1:
		return fmt.Errorf("simulate: rate must be positive, got %d", o.RatePerMinute)
	case o.SessionDuration < time.Second || o.SessionDuration%time.Second != 0 || o.SessionDuration > issuer.MaxSessionDuration:
		return fmt.Errorf("simulate: session must be whole seconds in 1s…%s, got %s", issuer.MaxSessionDuration, o.SessionDuration)
	case o.Tick < 100*time.Millisecond || o.Tick > time.Minute:
		return fmt.Errorf("simulate: tick must be 100ms…1m, got %s", o.Tick)
	case o.Abandon+o.BadActors+o.TabClose > 1:
		return fmt.Errorf("simulate: abandon (%g) + bad actors (%g) + tab close (%g) exceed 1", o.Abandon, o.BadActors, o.TabClose)
	case o.ArrivalWindow > 0 && (o.ArrivalWindow < time.Second || o.ArrivalWindow > issuer.MaxSessionDuration):
		return fmt.Errorf("simulate: arrival window must be 0 (off) or 1s…%s, got %s", issuer.MaxSessionDuration, o.ArrivalWindow)
	case o.PreQueue != string(issuer.PreQueueFIFO) && o.PreQueue != string(issuer.PreQueueShuffle):
		return fmt.Errorf("simulate: prequeue must be fifo or shuffle, got %q", o.PreQueue)
	case o.OpensIn < 0:
		return errors.New("simulate: opens-in must not be negative")
	case o.SoldOutAfter < 0:
		return fmt.Errorf("simulate: sold-out-after must not be negative, got %d", o.SoldOutAfter)
	case o.PriorityShare < 0 || o.BypassShare < 0 || o.PriorityShare+o.BypassShare > 1:
		return fmt.Errorf("simulate: priority share (%g) and bypass share (%g) must be 0…1 together", o.PriorityShare, o.BypassShare)
	case o.PollScale < 0:
		return fmt.Errorf("simulate: poll scale must be positive, got %g", o.PollScale)
	case o.Journal != "" && o.IssuerURL != "":
		return errors.New("simulate: Journal needs the in-process issuer (not IssuerURL): run `flashgate journal run` next to yours")
	case o.Ramp < 0 || o.Timeout < 0 || o.RetryFor < 0:
		return errors.New("simulate: ramp and timeout must not be negative")
	case !issuer.ValidID(o.Room):
		return fmt.Errorf("simulate: invalid room id %q", o.Room)
	case o.IssuerURL != "" && o.AdminToken == "":
		return errors.New("simulate: --issuer-url needs --admin-token (to configure the room and read its stats)")
	}
	return nil
}

// role is what a buyer does once admitted.
type role uint8

const (
	roleBuyer    role = iota // orders
	roleAbandon              // never orders; the admission expires
	roleBad                  // tampered and foreign-product tokens, then orders, then replays
	roleTabClose             // closes the tab right after entering: never polls, exchanges or leaves
)

// sim is one run.
type sim struct {
	o      Options
	env    *env
	hc     *http.Client
	orders string // order service base URL
	prefix string // user id prefix, unique per run

	waiting, admitted, ordered, lost, failed atomic.Int64
	// placesLost counts buyers whose place the line lost: a waiting token
	// that read NOT_FOUND while the buyer waited (Report.PlacesLost).
	placesLost atomic.Int64

	mu     sync.Mutex
	errors map[string]int
	sample []string

	// soldOut declares the sale sold out once (Options.SoldOutAfter);
	// soldOutAt is when it was answered (UnixNano; 0: not yet).
	soldOut   sync.Once
	soldOutAt atomic.Int64
	start     time.Time // the buyers' start
	// public is the room's lottery as anyone sees it after the run (the
	// room view and the JWKS: lotteryAudit); nil for a room without one.
	public *publicLottery
}

// Run runs one simulated flash sale and reports what happened. It returns
// an error only when the run could not be set up (store, servers, room
// configuration); buyers that fail are counted in Report.Errors, and broken
// invariants are listed in Report.Violations.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        2 * o.MaxConns,
		MaxIdleConnsPerHost: o.MaxConns,
		MaxConnsPerHost:     o.MaxConns,
		IdleConnTimeout:     90 * time.Second,
	}
	defer tr.CloseIdleConnections()
	s := &sim{o: o, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second},
		errors: map[string]int{}, prefix: fmt.Sprintf("sim%x-", rand.Uint32())}

	e, err := setup(ctx, &s.o, s.hc)
	if err != nil {
		return nil, err
	}
	s.env = e
	defer e.close()

	if err := s.configureRoom(ctx); err != nil {
		return nil, err
	}
	buyers := s.cast()
	if err := s.signInvites(ctx, buyers); err != nil {
		return nil, err
	}
	before, err := s.stats(ctx)
	if err != nil {
		return nil, err
	}
	if s.orders, err = e.startOrderService(ctx, &s.o, s.hc); err != nil {
		return nil, err
	}

	start := time.Now()
	s.start = start
	stopProgress := s.progress(start)
	var wg sync.WaitGroup
	for _, b := range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.buy(ctx, b, start)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()

	// Stats after the run: a fresh context, so a timed-out run still reports.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer scancel()
	after, err := s.stats(sctx)
	// Sold out: the tick drains the line in bounded steps; give it a moment.
	for i := 0; err == nil && s.soldOutAt.Load() != 0 && after.Waiting > 0 && i < 50; i++ {
		time.Sleep(100 * time.Millisecond)
		after, err = s.stats(sctx)
	}
	if err != nil {
		s.fail("final stats: " + err.Error())
	}
	s.closedTabs(sctx, buyers) // after the stats: admissions it sees the stats may not count, never the reverse
	if s.public, err = s.publicView(sctx); err != nil {
		s.fail("public room view: " + err.Error())
	}
	r := s.report(buyers, before, after, elapsed, ctx.Err())
	if e.journal != nil {
		s.checkJournal(sctx, r, before)
	}
	return r, nil
}

// checkJournal fills r.Journal once the journal process has caught up, and
// counts a journal that disagrees with the issuer's counters as a
// violation (a fresh room only: the journal's report covers the room's
// whole epoch, the counters this run's part of it).
func (s *sim) checkJournal(ctx context.Context, r *Report, before *server.Stats) {
	jr := &JournalReport{Store: redactDSN(s.o.Journal)}
	rep, caught, err := s.env.journalReport(ctx, s.o.Room)
	if err != nil {
		jr.Disagrees = err.Error()
		r.Journal = jr
		r.Violations = append(r.Violations, "journal: "+err.Error())
		r.OK = false
		return
	}
	jr.Report, jr.CaughtUp = rep, caught.Milliseconds()
	var diff []string
	if before != nil && before.Entered == 0 {
		for _, c := range []struct {
			name          string
			journal, runs int64
		}{{"entered", rep.Entered, r.Server.Entered}, {"admitted", rep.Admitted, r.Server.Admitted},
			{"completed", rep.Completed, r.Server.Completed}} {
			if c.journal != c.runs {
				diff = append(diff, fmt.Sprintf("%s %d, the issuer counted %d", c.name, c.journal, c.runs))
			}
		}
	}
	jr.Inversions = int64(s.env.journalCounter("flashgate_order_inversions_total"))
	jr.RateOvershoots = int64(s.env.journalCounter("flashgate_rate_overshoot_total"))
	jr.CapacityOvershoots = int64(s.env.journalCounter("flashgate_capacity_overshoot_total"))
	jr.ChecksSkipped = int64(s.env.journalCounter("flashgate_journal_limit_checks_skipped_total"))
	for _, c := range []struct {
		name string
		n    int64
	}{{"order inversions", jr.Inversions}, {"rate overshoots", jr.RateOvershoots}, {"capacity overshoots", jr.CapacityOvershoots}} {
		if c.n > 0 {
			diff = append(diff, fmt.Sprintf("%d %s (must be 0)", c.n, c.name))
		}
	}
	jr.Agrees, jr.Disagrees = len(diff) == 0, strings.Join(diff, "; ")
	if !jr.Agrees {
		r.Violations = append(r.Violations, "journal: "+jr.Disagrees)
		r.OK = false
	}
	r.Journal = jr
}

// redactDSN is a PostgreSQL URL without its password (a key=value DSN is
// named only as such: it may hold one).
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		return "(PostgreSQL DSN)"
	}
	return u.Redacted()
}

// cast assigns roles and think times, reproducibly from the seed.
func (s *sim) cast() []*buyer {
	o := s.o
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	n := o.Users
	nAbandon := int(float64(n)*o.Abandon + 0.5)
	nBad := min(int(float64(n)*o.BadActors+0.5), n-nAbandon)
	nTab := min(int(float64(n)*o.TabClose+0.5), n-nAbandon-nBad)
	perm := rng.Perm(n)
	buyers := make([]*buyer, n)
	for i := range buyers {
		b := &buyer{idx: i, user: fmt.Sprintf("%s%06d", s.prefix, i)}
		if o.Think > 0 {
			b.think = time.Duration(rng.Int64N(int64(2*o.Think) + 1))
		}
		if o.Ramp > 0 && n > 1 {
			b.arriveAfter = time.Duration(int64(o.Ramp) * int64(i) / int64(n-1))
		}
		buyers[i] = b
	}
	for k, i := range perm {
		switch {
		case k < nAbandon:
			buyers[i].role = roleAbandon
		case k < nAbandon+nBad:
			buyers[i].role = roleBad
		case k < nAbandon+nBad+nTab:
			buyers[i].role = roleTabClose
		}
	}
	// Lanes, independently of the roles (an invited buyer may abandon too).
	nPri := int(float64(n)*o.PriorityShare + 0.5)
	nBy := min(int(float64(n)*o.BypassShare+0.5), n-nPri)
	for k, i := range rng.Perm(n) {
		switch {
		case k < nPri:
			buyers[i].inviteLane = flashgate.LanePriority
		case k < nPri+nBy:
			buyers[i].inviteLane = flashgate.LaneBypass
		}
	}
	return buyers
}

func (s *sim) fail(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errors[msg]++
	if len(s.sample) < 5 && s.errors[msg] == 1 {
		s.sample = append(s.sample, msg)
	}
}

// progress prints one line per second to o.Progress until stopped.
func (s *sim) progress(start time.Time) (stop func()) {
	if s.o.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	line := func() {
		fmt.Fprintf(s.o.Progress, "simulate: %6.1fs  waiting %6d  admitted %6d  ordered %6d  lost %d  failed %d\n",
			time.Since(start).Seconds(), s.waiting.Load(), s.admitted.Load(), s.ordered.Load(), s.lost.Load(), s.failed.Load())
	}
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				line()
				return
			case <-t.C:
				line()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
