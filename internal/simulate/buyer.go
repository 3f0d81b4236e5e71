package simulate

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/ctxtime"
)

// buyer is one simulated user and what the servers told them.
type buyer struct {
	idx         int
	user        string
	role        role
	think       time.Duration
	arriveAfter time.Duration

	// admissions are this buyer's admissions: one, or more when an
	// admission lapsed before the buyer could use it (a slow client) and the
	// buyer queued again.
	admissions []*admission

	// waitingToken is a tab closer's, for the look at its entry after the run.
	waitingToken string
	// inviteLane is the lane of the buyer's invite ("" for none); invite is
	// the token (signInvites), used on the first visit only (single use).
	inviteLane, invite string
	// lane is where the buyer's latest entry went: "public", "priority", or
	// "bypass" (admitted at once by a bypass invite).
	lane string

	// receipts are the join receipts of the buyer's pre-queue entries;
	// noReceipt counts pre-queue entries that came without one.
	receipts  []string
	noReceipt int

	orders         int // 201 answers for this buyer
	forgedAccepted int // a tampered or foreign-product token that got a 201
	replayAccepted int // a replay that got a 201
	doubleAdmitted int // a second admission id seen for one entry
	failed         bool

	// The end of the sale (Options.SoldOutAfter): closedAt is when the
	// buyer saw its entry CLOSED (closedReason why), refused that its
	// enter was refused as room_closed after the sold-out.
	closedAt     time.Time
	closedReason string
	refused      bool
}

// admission is one entry that reached ACTIVE.
type admission struct {
	enteredAt time.Time // enter answered (client clock)
	activeAt  time.Time // ACTIVE first observed (client clock)
	fastTrack bool
	lost      bool   // lapsed before the order
	lane      string // public, priority or bypass (the entry's, at enter)

	arrival      int64 // server: arrival number
	number       int64 // server: admission number
	id           string
	admittedAtMs int64 // server clock
	expiresAtMs  int64 // server clock

	// reads are the estimates the buyer read while WAITING (enter, then
	// every status), known ones only; reads[0] is the first.
	reads []estimateRead
}

// estimateRead is one estimate read: when (client clock, ms), the issuer's
// estimated_wait_ms, and what the formula before measured outflow, ahead ×
// 60 s / rate, said for the same read.
type estimateRead struct {
	atMs, etaMs, oldEtaMs int64
}

// noteEstimate records e's estimate, if e (WAITING) carries a known one.
func (a *admission) noteEstimate(e *entry, rate int) {
	if e.State != "WAITING" || e.EstimatedWaitMs == nil || *e.EstimatedWaitMs < 0 || e.Ahead == nil {
		return
	}
	a.reads = append(a.reads, estimateRead{atMs: time.Now().UnixMilli(), etaMs: *e.EstimatedWaitMs,
		oldEtaMs: *e.Ahead * 60_000 / int64(rate)})
}

// maxAttempts bounds how often a buyer queues again after losing an admission.
const maxAttempts = 5

// entry is the issuer's Entry JSON.
type entry struct {
	State        string `json:"state"`
	WaitingToken string `json:"waiting_token"`
	Arrival      int64  `json:"arrival"`
	Position     int64  `json:"position"`
	Ahead        *int64 `json:"ahead"`
	PollAfterMs  *int64 `json:"poll_after_ms"`
	// EstimatedWaitMs is the issuer's estimate (−1 unknown).
	EstimatedWaitMs *int64 `json:"estimated_wait_ms"`
	AdmissionID     string `json:"admission_id"`
	Admission       int64  `json:"admission"`
	AdmittedAtMs    int64  `json:"admitted_at_ms"`
	ExpiresAtMs     int64  `json:"expires_at_ms"`
	EndedAtMs       int64  `json:"ended_at_ms"`
	Reason          string `json:"reason"`
	Lane            string `json:"lane"`
	// PreQueue and Receipt: a shuffle room's pre-queue entry and its join
	// receipt (checked after the run from public data: lotteryAudit).
	PreQueue bool   `json:"pre_queue"`
	Receipt  string `json:"receipt"`
}

type exchangeAnswer struct {
	AdmissionToken string `json:"admission_token"`
	AdmissionID    string `json:"admission_id"`
	Admission      int64  `json:"admission"`
	ExpiresAtMs    int64  `json:"expires_at_ms"`
}

// problem is the part of an RFC 9457 answer the simulation looks at.
type problem struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

func (p *problem) String() string {
	r := p.Reason
	if r == "" {
		r = p.Code
	}
	return fmt.Sprintf("%d %s", p.Status, r)
}

// call performs one request and decodes a 2xx answer into out. Transport
// errors and 502/503/504/429 answers are retried with backoff (every
// flashgate call the buyers make is idempotent); retried reports whether a
// transport error preceded the final answer.
func (s *sim) call(ctx context.Context, method, u string, user, bearer string, out any) (p *problem, retried bool, err error) {
	return s.callBody(ctx, method, u, user, bearer, nil, out)
}

// callBody is call with a JSON request body (nil: none).
func (s *sim) callBody(ctx context.Context, method, u string, user, bearer string, reqBody []byte, out any) (p *problem, retried bool, err error) {
	backoff := 50 * time.Millisecond
	began := time.Now()
	for {
		var status int
		var body []byte
		status, body, err = s.do(ctx, method, u, user, bearer, reqBody)
		transient := err != nil || status == http.StatusServiceUnavailable || status == http.StatusBadGateway ||
			status == http.StatusGatewayTimeout || status == http.StatusTooManyRequests
		if !transient || time.Since(began) >= s.o.RetryFor || ctx.Err() != nil {
			if err != nil {
				return nil, retried, err
			}
			if status/100 == 2 {
				if out != nil {
					if err := json.Unmarshal(body, out); err != nil {
						return nil, retried, fmt.Errorf("%s %s: decode answer: %w", method, u, err)
					}
				}
				return nil, retried, nil
			}
			p = &problem{Status: status}
			_ = json.Unmarshal(body, p)
			p.Status = status
			return p, retried, nil
		}
		if err != nil {
			retried = true
		}
		if !ctxtime.Sleep(ctx, backoff) {
			return nil, retried, ctx.Err()
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func (s *sim) do(ctx context.Context, method, u, user, bearer string, reqBody []byte) (int, []byte, error) {
	var rd io.Reader
	if reqBody != nil {
		rd = bytes.NewReader(reqBody)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, err
	}
	if reqBody != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != "" {
		req.Header.Set(s.o.UserHeader, user)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, body, nil
}

// buy is one buyer's whole visit.
func (s *sim) buy(ctx context.Context, b *buyer, start time.Time) {
	if !ctxtime.Sleep(ctx, time.Until(start.Add(b.arriveAfter))) {
		s.failBuyer(b, "run ended before arrival")
		return
	}
	for attempt := 1; ; attempt++ {
		lost, err := s.visit(ctx, b)
		if err != nil {
			s.failBuyer(b, err.Error())
			return
		}
		if lost == "" {
			return
		}
		s.lost.Add(1)
		if attempt == maxAttempts {
			s.failBuyer(b, "admission lost "+strconv.Itoa(maxAttempts)+" times, last: "+lost)
			return
		}
	}
}

func (s *sim) failBuyer(b *buyer, msg string) {
	b.failed = true
	s.failed.Add(1)
	s.fail(msg)
}

// visit is one pass through the waiting room. lost is non-empty when the
// admission lapsed before the order went through (the buyer queues again).
func (s *sim) visit(ctx context.Context, b *buyer) (lost string, err error) {
	roomURL := s.env.base + "/v1/rooms/" + url.PathEscape(s.o.Room)
	var e entry
	var body []byte
	if b.invite != "" { // single use: the first visit only
		body, _ = json.Marshal(map[string]string{"invite": b.invite})
		b.invite = ""
	}
	p, _, err := s.callBody(ctx, http.MethodPost, roomURL+"/enter", b.user, "", body, &e)
	if p != nil && p.Code == "room_closed" && s.soldOutAt.Load() != 0 {
		b.refused = true // came (back) after the sold-out
		return "", nil
	}
	if err != nil || p != nil {
		return "", fmt.Errorf("enter: %s", describe(p, err))
	}
	if e.PreQueue {
		if e.Receipt == "" {
			b.noReceipt++
		} else {
			b.receipts = append(b.receipts, e.Receipt)
		}
	}
	b.lane = e.Lane
	if body != nil && e.State == "ACTIVE" {
		b.lane = flashgate.LaneBypass
	}
	if b.lane == "" {
		b.lane = flashgate.LanePublic // (a fast-tracked or repeated public enter)
	}
	a := &admission{enteredAt: time.Now(), arrival: e.Arrival, lane: b.lane,
		fastTrack: e.State == "ACTIVE" && b.lane != flashgate.LaneBypass}
	a.noteEstimate(&e, s.o.RatePerMinute)
	waitingToken := e.WaitingToken
	if b.role == roleTabClose {
		b.waitingToken = waitingToken // closes the tab: not another request
		return "", nil
	}
	if e.State == "WAITING" {
		s.waiting.Add(1)
		for e.State == "WAITING" {
			poll := time.Second
			if e.PollAfterMs != nil {
				poll = time.Duration(*e.PollAfterMs) * time.Millisecond
			}
			poll = max(time.Duration(float64(poll)*s.o.PollScale), 10*time.Millisecond)
			if !ctxtime.Sleep(ctx, poll) {
				s.waiting.Add(-1)
				return "", errors.New("run ended while waiting")
			}
			e = entry{}
			p, _, err = s.call(ctx, http.MethodGet, roomURL+"/status", b.user, waitingToken, &e)
			if err != nil || p != nil {
				s.waiting.Add(-1)
				return "", fmt.Errorf("status: %s", describe(p, err))
			}
			a.noteEstimate(&e, s.o.RatePerMinute)
		}
		s.waiting.Add(-1)
	}
	switch e.State {
	case "ACTIVE":
	case "CLOSED":
		// The sale ended while waiting: a final state.
		b.closedAt, b.closedReason = time.Now(), e.Reason
		return "", nil
	case "EXPIRED":
		// Admitted and lapsed between two polls: record it, queue again.
		a.number, a.id, a.lost = e.Admission, e.AdmissionID, true
		a.admittedAtMs, a.expiresAtMs = e.AdmittedAtMs, e.AdmittedAtMs+s.o.SessionDuration.Milliseconds()
		if e.Reason == "not_claimed" && e.EndedAtMs > e.AdmittedAtMs {
			a.expiresAtMs = e.EndedAtMs // the arrival window freed the slot
		}
		if a.number > 0 {
			a.activeAt = time.Now()
			b.admissions = append(b.admissions, a)
		}
		return "lapsed while polling", nil
	default:
		if e.State == "NOT_FOUND" {
			s.placesLost.Add(1)
		}
		return "", fmt.Errorf("entry became %s instead of ACTIVE (arrival %d)", e.State, a.arrival)
	}
	a.activeAt = time.Now()
	a.number, a.id = e.Admission, e.AdmissionID
	a.admittedAtMs, a.expiresAtMs = e.AdmittedAtMs, e.ExpiresAtMs
	b.admissions = append(b.admissions, a)
	s.admitted.Add(1)

	var x exchangeAnswer
	p, _, err = s.call(ctx, http.MethodPost, roomURL+"/exchange", b.user, waitingToken, &x)
	if p != nil && p.Code == "expired" {
		a.lost = true
		return "lapsed before exchange", nil
	}
	if err != nil || p != nil {
		return "", fmt.Errorf("exchange: %s", describe(p, err))
	}
	if x.AdmissionID != a.id {
		b.doubleAdmitted++
	}
	if b.role == roleAbandon {
		return "", nil // walks away: the admission expires
	}
	if !ctxtime.Sleep(ctx, b.think) {
		return "", errors.New("run ended while shopping")
	}

	orderURL := s.orders + "/orders/" + url.PathEscape(s.o.Room)
	if b.role == roleBad && b.orders == 0 {
		// A token with an extended expiry (the signature no longer matches),
		// and the genuine token presented for another product.
		if p, _, err := s.call(ctx, http.MethodPost, orderURL, b.user, tamper(x.AdmissionToken), nil); err == nil && p == nil {
			b.forgedAccepted++
		} else if err != nil {
			return "", fmt.Errorf("tampered order: %s", describe(p, err))
		}
		other := s.orders + "/orders/" + url.PathEscape(s.o.Room+"-other")
		if p, _, err := s.call(ctx, http.MethodPost, other, b.user, x.AdmissionToken, nil); err == nil && p == nil {
			b.forgedAccepted++
		} else if err != nil {
			return "", fmt.Errorf("foreign-product order: %s", describe(p, err))
		}
	}
	p, retried, err := s.call(ctx, http.MethodPost, orderURL, b.user, x.AdmissionToken, nil)
	switch {
	case err != nil:
		return "", fmt.Errorf("order: %s", describe(p, err))
	case p == nil:
	case retried && p.Status == http.StatusConflict:
		// The first attempt went through but its answer was lost.
	case p.Reason == "expired" || p.Code == "expired":
		// Too slow: the token (401) or the admission (410) lapsed.
		a.lost = true
		return "lapsed before the order", nil
	default:
		return "", fmt.Errorf("order refused: %s", describe(p, nil))
	}
	b.orders++
	if n := s.ordered.Add(1); s.o.SoldOutAfter > 0 && n >= int64(s.o.SoldOutAfter) {
		s.soldOut.Do(func() { s.declareSoldOut(ctx) })
	}
	if b.role == roleBad {
		if p, _, err := s.call(ctx, http.MethodPost, orderURL, b.user, x.AdmissionToken, nil); err == nil && p == nil {
			b.replayAccepted++
		} else if err != nil {
			return "", fmt.Errorf("replayed order: %s", describe(p, err))
		}
	}
	return "", nil
}

func describe(p *problem, err error) string {
	if err != nil {
		return err.Error()
	}
	if p != nil {
		if p.Detail != "" {
			return p.String() + ": " + p.Detail
		}
		return p.String()
	}
	return "ok"
}

// tamper returns token with its exp claim pushed an hour later and the
// original signature: what someone editing their token would send.
func tamper(token string) string {
	var h, pl, sig string
	for i, part := range strings.Split(token, ".") {
		switch i {
		case 0:
			h = part
		case 1:
			pl = part
		case 2:
			sig = part
		}
	}
	raw, err := base64.RawURLEncoding.DecodeString(pl)
	if err != nil {
		return token + "x"
	}
	var claims map[string]any
	if err := json.Unmarshal(raw, &claims); err != nil {
		return token + "x"
	}
	exp, _ := claims["exp"].(float64)
	claims["exp"] = json.Number(strconv.FormatInt(int64(exp)+3600, 10))
	out, err := json.Marshal(claims)
	if err != nil {
		return token + "x"
	}
	return h + "." + base64.RawURLEncoding.EncodeToString(out) + "." + sig
}

// closedTabs looks, once the run is over, at the entry of every buyer who
// closed the tab (with their own token, as their page would have): an
// admission nobody used holds its slot from admission until the arrival
// window ends it (EXPIRED, not_claimed), or until the session ends without
// one. Each such admission becomes a record (FIFO, capacity and rate count
// it; its interval ends when the slot was, or will be, freed), and its held
// time adds to the report's idle slot-seconds.
func (s *sim) closedTabs(ctx context.Context, buyers []*buyer) {
	roomURL := s.env.base + "/v1/rooms/" + url.PathEscape(s.o.Room)
	for _, b := range buyers {
		if b.role != roleTabClose || b.waitingToken == "" {
			continue
		}
		var e entry
		p, _, err := s.call(ctx, http.MethodGet, roomURL+"/status", b.user, b.waitingToken, &e)
		if err != nil || p != nil {
			s.fail("closed tab's status: " + describe(p, err))
			continue
		}
		if e.Admission == 0 || e.AdmittedAtMs == 0 {
			continue // never admitted (still waiting at the end)
		}
		end := e.EndedAtMs // EXPIRED: when the slot was freed (not_claimed: the window's end)
		if e.State == "ACTIVE" {
			end = e.ExpiresAtMs // nobody will claim it: the window ends it, or the session
			if w := s.o.ArrivalWindow; w > 0 && e.AdmittedAtMs+w.Milliseconds() < end {
				end = e.AdmittedAtMs + w.Milliseconds()
			}
		}
		if end <= e.AdmittedAtMs {
			end = e.AdmittedAtMs + s.o.SessionDuration.Milliseconds()
		}
		b.admissions = append(b.admissions, &admission{arrival: e.Arrival, number: e.Admission, id: e.AdmissionID,
			admittedAtMs: e.AdmittedAtMs, expiresAtMs: end, lost: true, lane: b.lane})
	}
}

// declareSoldOut closes the room with reason sold_out through the admin API
// and records when it was answered. Like an operator, it tries again (up to
// 5 times, 200 ms apart) when the call fails in transit or answers 503 (the
// queue store slow or away: a busy machine), since a sold-out must land.
func (s *sim) declareSoldOut(ctx context.Context) {
	var status int
	var raw []byte
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				s.fail(fmt.Sprintf("sold-out: %v", ctx.Err()))
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
		status, raw, err = s.adminDo(ctx, http.MethodPost, "/admin/rooms/"+url.PathEscape(s.o.Room)+"/sold-out", nil)
		if err == nil && status == http.StatusOK {
			s.soldOutAt.Store(time.Now().UnixNano())
			return
		}
		if err == nil && status != http.StatusServiceUnavailable {
			break
		}
	}
	s.fail(fmt.Sprintf("sold-out: %d %v %s", status, err, strings.TrimSpace(string(raw))))
}
