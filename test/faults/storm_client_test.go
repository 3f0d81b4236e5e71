package faults_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/flashgate/flashgate/internal/ctxtime"
)

// This file holds the storm's buyers: HTTP clients that enter, poll,
// exchange and complete (or abandon) through both replicas, retry what the
// API says is retryable, and record every answer they get.

// Buyer behaviour, scaled for a run of seconds rather than minutes.
const (
	maxVisits        = 6                      // entries one buyer makes at most (re-entries after NOT_FOUND, expiry, refusals)
	retryCap         = 250 * time.Millisecond // Retry-After of 503/429 honoured up to this
	pollMin, pollMax = 100 * time.Millisecond, 500 * time.Millisecond
	pollScale        = 8                // poll_after_ms / pollScale, clamped to [pollMin, pollMax]
	clientTimeout    = 10 * time.Second // no answer within this is a violation
	answerWithin     = 3 * time.Second  // any answer later than this is a violation: a hung or dead Redis must become a prompt 503
	abandonShare     = 0.25             // buyers who exchange and walk away (their admission expires)
	repeatShare      = 0.2              // buyers who send their completion twice (a client retry)
	returnShare      = 0.3              // buyers who come back for a second purchase after buying
	thinkMin         = 300 * time.Millisecond
	thinkMax         = 4500 * time.Millisecond // < session − poll − exchange: a thinking buyer's token is still valid
)

// reply is every member the storm reads from any answer: an Entry (enter,
// status), an exchange answer, a completion answer, or a problem.
type reply struct {
	Room         string `json:"room"`
	State        string `json:"state"`
	WaitingToken string `json:"waiting_token"`
	Arrival      int64  `json:"arrival"`
	PollAfterMs  *int64 `json:"poll_after_ms"`
	AdmissionID  string `json:"admission_id"`
	Admission    int64  `json:"admission"`
	AdmittedAtMs int64  `json:"admitted_at_ms"`
	ExpiresAtMs  int64  `json:"expires_at_ms"`
	EndedAtMs    int64  `json:"ended_at_ms"`

	AdmissionToken string `json:"admission_token"`
	ExpiresAt      int64  `json:"expires_at"`

	CompletedAtMs int64 `json:"completed_at_ms"`
	Repeated      bool  `json:"repeated"`

	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// call is one request and what came back.
type call struct {
	b       *buyer
	v       *visit // the entry the request concerned (nil: an enter that created none)
	op      string // enter, status, exchange, complete
	replica int
	sent    time.Time
	got     time.Time
	status  int    // 0: no HTTP answer
	err     string // transport error
	timeout bool   // no answer within clientTimeout
	cut     bool   // cut short by the end of the run
	retry   string // Retry-After
	body    string // clipped
	r       reply
	// complete only: the admission id of the token sent, and whether this
	// buyer had sent a completion for it before this request.
	jti        string
	sentBefore bool
}

// definitive reports whether the answer settles the request (not a 503,
// a 429 or a transport failure, which the client retries).
func (c *call) definitive() bool {
	return c.status != 0 && c.status != http.StatusServiceUnavailable && c.status != http.StatusTooManyRequests
}

// visit is one entry of a buyer: from an enter answer to its end.
type visit struct {
	token     string
	arrival   int64
	enteredAt time.Time // the enter answer arrived
	jti       string    // admission id once seen ACTIVE
	tokenJTI  string    // admission id the exchange answered (the token's jti)
}

// buyer is one user and everything it saw.
type buyer struct {
	user     string
	room     int // index in storm.rooms
	abandon  bool
	repeat   bool
	returns  bool // buys a second time
	think    time.Duration
	arrive   time.Duration
	rng      *rand.Rand
	replica  int
	calls    []*call
	visits   []*visit
	bought   int
	done     string // why the buyer stopped
	complete map[string]int
}

// storm is one run's clients.
type storm struct {
	rooms       []string
	bases       []string
	hc          *http.Client
	maxRequests int // per buyer
}

func newStormClient() *http.Client {
	return &http.Client{Timeout: clientTimeout, Transport: &http.Transport{Proxy: nil,
		MaxIdleConns: 512, MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}}
}

// send performs one request against the buyer's current replica and
// records the answer.
func (s *storm) send(ctx context.Context, b *buyer, v *visit, op, method, path, bearer string) *call {
	c := &call{b: b, v: v, op: op, replica: b.replica}
	b.calls = append(b.calls, c)
	req, err := http.NewRequestWithContext(ctx, method, s.bases[b.replica]+path, nil)
	if err != nil {
		c.err = err.Error()
		return c
	}
	req.Header.Set("X-User-ID", b.user)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	c.sent = time.Now()
	res, err := s.hc.Do(req)
	if err != nil {
		c.got = time.Now()
		c.err = err.Error()
		var ue *url.Error
		c.timeout = errors.As(err, &ue) && ue.Timeout() && ctx.Err() == nil
		c.cut = ctx.Err() != nil
		return c
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	_ = res.Body.Close()
	c.got = time.Now()
	if err != nil {
		c.err = "reading the body: " + err.Error()
		return c
	}
	c.status, c.retry = res.StatusCode, res.Header.Get("Retry-After")
	c.body = clipString(string(body), 300)
	_ = json.Unmarshal(body, &c.r)
	return c
}

// ask sends until the answer is definitive, honouring Retry-After (capped)
// and moving to the other replica after a transport failure. It returns nil
// when ctx ends or the buyer's request budget is spent.
func (s *storm) ask(ctx context.Context, b *buyer, v *visit, op, method, path, bearer string) *call {
	for len(b.calls) < s.maxRequests && ctx.Err() == nil {
		c := s.send(ctx, b, v, op, method, path, bearer)
		if c.definitive() {
			return c
		}
		wait := 20 * time.Millisecond
		switch {
		case c.status != 0:
			if sec, err := strconv.Atoi(c.retry); err == nil && sec > 0 {
				wait = min(time.Duration(sec)*time.Second, retryCap)
			} else {
				wait = retryCap
			}
		default:
			b.replica = (b.replica + 1) % len(s.bases)
		}
		wait += time.Duration(b.rng.IntN(50)) * time.Millisecond
		if !ctxtime.Sleep(ctx, wait) {
			return nil
		}
		if b.rng.IntN(4) == 0 {
			b.replica = b.rng.IntN(len(s.bases)) // spread the retries too
		}
	}
	return nil
}

// shop is one buyer's whole visit to the sale: enter, poll, exchange, then
// complete (most) or walk away; re-enter when the entry is gone, expired or
// refused. Requests stop when ctx ends; a completion already under way is
// retried until it is settled or drain ends, so the checks know how every
// completion ended.
func (s *storm) shop(ctx, drain context.Context, b *buyer, start time.Time) {
	if !ctxtime.Sleep(ctx, time.Until(start.Add(b.arrive))) {
		b.done = "storm ended before arrival"
		return
	}
	room := s.rooms[b.room]
	roomPath := "/v1/rooms/" + url.PathEscape(room)
	for len(b.visits) < maxVisits {
		b.replica = b.rng.IntN(len(s.bases))
		c := s.ask(ctx, b, nil, "enter", http.MethodPost, roomPath+"/enter", "")
		if c == nil {
			b.done = "storm ended while entering"
			return
		}
		if c.status != http.StatusOK || c.r.WaitingToken == "" {
			// Refused (a 500 …): try again, as a browser's user would.
			if !ctxtime.Sleep(ctx, retryCap) {
				b.done = "storm ended after a refused enter"
				return
			}
			continue
		}
		v := &visit{token: c.r.WaitingToken, arrival: c.r.Arrival, enteredAt: c.got}
		c.v = v
		b.visits = append(b.visits, v)
		e := c.r
		for e.State == "WAITING" {
			poll := pollMax
			if e.PollAfterMs != nil {
				poll = min(max(time.Duration(*e.PollAfterMs)*time.Millisecond/pollScale, pollMin), pollMax)
			}
			if !ctxtime.Sleep(ctx, poll) {
				b.done = "storm ended while waiting"
				return
			}
			b.replica = b.rng.IntN(len(s.bases))
			c = s.ask(ctx, b, v, "status", http.MethodGet, roomPath+"/status", v.token)
			if c == nil {
				b.done = "storm ended while waiting"
				return
			}
			e = reply{State: "refused"}
			if c.status == http.StatusOK {
				e = c.r
			}
		}
		if e.State != "ACTIVE" {
			continue // NOT_FOUND, EXPIRED, a refusal …: enter again
		}
		v.jti = e.AdmissionID
		b.replica = b.rng.IntN(len(s.bases))
		c = s.ask(ctx, b, v, "exchange", http.MethodPost, roomPath+"/exchange", v.token)
		if c == nil {
			b.done = "storm ended before the exchange"
			return
		}
		if c.status != http.StatusOK {
			continue // expired, gone, not admitted after all: enter again (idempotent)
		}
		token := c.r.AdmissionToken
		v.tokenJTI = c.r.AdmissionID
		if b.abandon {
			b.done = "abandoned (admission left to expire)"
			return
		}
		if !ctxtime.Sleep(ctx, b.think) {
			b.done = "storm ended while shopping"
			return
		}
		completePath := "/v1/complete?product=" + url.QueryEscape(room)
		sends := 1
		if b.repeat {
			sends = 2
		}
		var last *call
		for range sends {
			if last = s.completeOnce(drain, b, v, completePath, token); last == nil {
				b.done = "completion unsettled at the end of the drain"
				return
			}
			if last.status != http.StatusOK {
				break
			}
		}
		if last.status == http.StatusOK {
			b.bought++
			b.done = "bought"
			if b.bought == 2 {
				b.done = "bought twice"
			}
			if b.bought == 1 && b.returns && ctxtime.Sleep(ctx, b.think) {
				continue // back for another one: a new entry at the end of the line
			}
			return
		}
		// Refused (expired, not found …): queue again.
	}
	b.done = "out of visits"
}

// completeOnce sends one completion (retried until it is settled) and
// notes, for the checks, whether this buyer had sent one for the same
// admission before.
func (s *storm) completeOnce(ctx context.Context, b *buyer, v *visit, path, token string) *call {
	b.replica = b.rng.IntN(len(s.bases))
	n := len(b.calls)
	c := s.ask(ctx, b, v, "complete", http.MethodPost, path, token)
	for _, cc := range b.calls[n:] {
		cc.jti = v.tokenJTI
		cc.sentBefore = b.complete[v.tokenJTI] > 0
		b.complete[v.tokenJTI]++
	}
	return c
}
