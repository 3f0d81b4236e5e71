package simulate

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/journal"
	"github.com/flashgate/flashgate/server"
)

// Report is the outcome of a run. The JSON form (one object) uses the
// snake_case names below.
type Report struct {
	Room  string `json:"room"`
	Store string `json:"store"`
	Seed  uint64 `json:"seed"`

	Users     int `json:"users"`
	Abandoned int `json:"abandoned"`  // buyers told never to order
	BadActors int `json:"bad_actors"` // buyers told to misbehave
	// TabClosed counts buyers who closed the tab while waiting (never
	// exchanged); TabClosedAdmitted those of them admitted by the end.
	TabClosed         int `json:"tab_closed"`
	TabClosedAdmitted int `json:"tab_closed_admitted"`
	// IdleSlotMs is admitted-but-unused capacity × time: for every
	// admission of a buyer who closed the tab, the ms from admission until
	// its slot was (or will be) freed — at the end of the arrival window
	// (ArrivalWindowMs), or of the session without one. IdleSlotSeconds is
	// the same in seconds, deprecated in JSON (durations are _ms:
	// docs/http-api.md#units), emitted for one release.
	IdleSlotMs      int64   `json:"idle_slot_ms"`
	IdleSlotSeconds float64 `json:"idle_slot_seconds"`
	ArrivalWindowMs int64   `json:"arrival_window_ms"` // the room's (0: off)
	Admitted        int     `json:"admitted"`          // buyers who saw ACTIVE
	// Admissions counts admissions (more than Admitted when some lapsed
	// before the buyer used them and the buyer queued again).
	Admissions int `json:"admissions"`
	// LostAdmissions lapsed before the order (slow buyers, not abandoners).
	LostAdmissions int `json:"lost_admissions"`
	FastTrack      int `json:"fast_track"` // admitted straight from enter
	Completed      int `json:"completed"`  // orders placed (one per buyer at most)
	// ExpectedOrders counts the buyers meant to order (not abandoning, not
	// closing the tab) whom a sold-out did not stop (CLOSED, refused).
	ExpectedOrders int `json:"expected_orders"`
	Errors         int `json:"errors"` // buyers who could not finish
	// Journal is what the journal holds for the room at the end (Options.Journal;
	// absent without one).
	Journal *JournalReport `json:"journal,omitempty"`
	// PlacesLost counts buyers whose place the line lost while they waited
	// (their waiting token read NOT_FOUND: the entry was gone, e.g. Redis
	// lost its data and the room was recreated empty); each is also an
	// error. Zero when a restore from the journal kept every place.
	PlacesLost int `json:"places_lost"`
	// ErrorSamples are the first distinct error messages.
	ErrorSamples []string `json:"error_samples,omitempty"`

	// FIFOViolations counts buyers admitted before someone ahead of them in
	// their lane's order: arrival order, except that with the pre-queue
	// lottery (PreQueue shuffle) the public line's drawn entries come first
	// in the order the published seed gives them (recomputed here,
	// issuer.LotteryOrder). The lanes together are not FIFO: the priority
	// lane goes first by design.
	FIFOViolations int `json:"fifo_violations"`
	// Lanes is the lane fairness report (docs/rooms.md "Priority lanes and
	// invites"); absent when nobody held an invite.
	Lanes *LaneReport `json:"lanes,omitempty"`
	// PreQueue is the room's pre-queue order; Lottery the draw, when the
	// room had one. PreQueueDeprecated is PreQueue under its old name,
	// emitted for one release.
	PreQueue           string         `json:"pre_queue"`
	PreQueueDeprecated string         `json:"prequeue"`
	Lottery            *LotteryReport `json:"lottery,omitempty"`
	// PeakActive is the most admissions live at once, computed from every
	// buyer's admitted_at_ms and min(completion, expires_at_ms) (server clock).
	PeakActive int `json:"peak_active"`
	// ServerPeakActive is the issuer's own peak_active counter for the room
	// (all time: it includes earlier runs against the same room).
	ServerPeakActive     int64 `json:"server_peak_active"`
	Capacity             int   `json:"capacity"`
	MaxAdmittedPerMinute int   `json:"max_admitted_per_minute"`
	RatePerMinute        int   `json:"rate_per_minute"`
	DoubleAdmissions     int   `json:"double_admissions"`
	ForgedAccepted       int   `json:"forged_accepted"`
	DoubleCompletions    int   `json:"double_completions"`

	WaitP50Ms int64 `json:"wait_p50_ms"` // enter answered → ACTIVE observed
	WaitP95Ms int64 `json:"wait_p95_ms"`
	WaitMaxMs int64 `json:"wait_max_ms"`

	// Estimate is how far the first estimated wait a buyer read was from
	// the wait it had; EstimateAllReads the same over every read.
	Estimate         EstimateError `json:"estimate"`
	EstimateAllReads EstimateError `json:"estimate_all_reads"`

	TokensVerified int64            `json:"tokens_verified"` // by the order service
	Rejections     map[string]int64 `json:"rejections"`      // order service refusals by reason

	// SoldOut is the end of the sale (Options.SoldOutAfter); nil when the
	// run did not sell out.
	SoldOut *SoldOutReport `json:"sold_out,omitempty"`

	// Server is the room's counters for this run (after − before).
	Server ServerCounts `json:"server"`

	DurationMs int64 `json:"duration_ms"`
	TimedOut   bool  `json:"timed_out"`
	// Violations lists the broken invariants; empty when all hold.
	Violations []string `json:"violations"`
	OK         bool     `json:"ok"`
}

// LotteryReport is the pre-queue lottery as the run saw it.
type LotteryReport struct {
	Seed       string `json:"seed"`
	Epoch      string `json:"epoch"`
	Cutoff     int64  `json:"cutoff"` // pre-queue: arrival numbers 1 … cutoff
	Commitment string `json:"commitment"`
	// Receipts counts the buyers' join receipts checked against the public
	// room view and JWKS (issuer.CheckReceipt: signature, room, epoch, the
	// seed against the commitment); ReceiptsRefused those refused, and
	// MissingReceipts pre-queue entries that came without one.
	Receipts        int `json:"receipts"`
	ReceiptsRefused int `json:"receipts_refused"`
	MissingReceipts int `json:"missing_receipts"`
	// PreQueueAdmitted counts admissions of pre-queue entries.
	PreQueueAdmitted int `json:"pre_queue_admitted"`
	// RankCorrelation is Spearman's ρ between arrival and admission order
	// over the pre-queue's admissions: about 0 for a fair draw (1 would be
	// arrival order: whoever hit the URL first).
	RankCorrelation float64 `json:"rank_correlation"`
}

// SoldOutReport is what the sold-out did: how many buyers were still
// waiting and saw their entry end CLOSED, and how fast (from the sold-out's
// answer to the buyer's next status, which depends on its poll interval).
type SoldOutReport struct {
	After int   `json:"after"` // orders that triggered it (Options.SoldOutAfter)
	AtMs  int64 `json:"at_ms"` // since the start of the run
	// Closed counts buyers who saw CLOSED; WrongReason those of them whose
	// reason was not sold_out; Refused buyers whose enter came after it.
	Closed      int   `json:"closed"`
	WrongReason int   `json:"wrong_reason"`
	Refused     int   `json:"refused"`
	ClosedP50Ms int64 `json:"closed_p50_ms"` // sold-out → CLOSED seen
	ClosedP95Ms int64 `json:"closed_p95_ms"`
	ClosedMaxMs int64 `json:"closed_max_ms"`
	// ClosedOut is the issuer's closed_out counter for the run: waiting
	// entries its drain removed; WaitingAtEnd what was still in the line.
	ClosedOut    int64 `json:"closed_out"`
	WaitingAtEnd int64 `json:"waiting_at_end"`
}

// EstimateError compares, for every admission a buyer waited for, the first
// estimate it read (estimated_wait_ms of enter, else of the first status
// with a known one) with the wait it actually had: from that read (client
// clock) to its admission (admitted_at_ms, the issuer's clock; in process
// both are this host's clock). All in ms. The Old… figures are what the
// formula before measured outflow (ahead × 60 s / rate) said at the same
// reads, for comparison in the same run. Bias is the median of estimate −
// actual (> 0: estimates too long). Reads counts the reads compared (one
// per buyer for the first read; every poll for all reads).
type EstimateError struct {
	Reads          int   `json:"reads"`
	ActualP50Ms    int64 `json:"actual_p50_ms"`
	ActualP95Ms    int64 `json:"actual_p95_ms"`
	AbsErrorP50Ms  int64 `json:"abs_error_p50_ms"`
	AbsErrorP95Ms  int64 `json:"abs_error_p95_ms"`
	BiasP50Ms      int64 `json:"bias_p50_ms"`
	OldAbsErrP50Ms int64 `json:"old_abs_error_p50_ms"`
	OldAbsErrP95Ms int64 `json:"old_abs_error_p95_ms"`
	OldBiasP50Ms   int64 `json:"old_bias_p50_ms"`
}

// estimateError computes r.Estimate (first reads) or r.EstimateAllReads from the records.
func estimateError(recs []*admission, all bool) EstimateError {
	var actual, abs, bias, oldAbs, oldBias []int64
	for _, a := range recs {
		if len(a.reads) == 0 || a.admittedAtMs == 0 {
			continue
		}
		reads := a.reads
		if !all {
			reads = reads[:1]
		}
		for _, x := range reads {
			w := max(0, a.admittedAtMs-x.atMs)
			actual = append(actual, w)
			abs, bias = append(abs, absInt(x.etaMs-w)), append(bias, x.etaMs-w)
			oldAbs, oldBias = append(oldAbs, absInt(x.oldEtaMs-w)), append(oldBias, x.oldEtaMs-w)
		}
	}
	for _, s := range [][]int64{actual, abs, bias, oldAbs, oldBias} {
		slices.Sort(s)
	}
	return EstimateError{Reads: len(actual), ActualP50Ms: percentile(actual, 0.5), ActualP95Ms: percentile(actual, 0.95),
		AbsErrorP50Ms: percentile(abs, 0.5), AbsErrorP95Ms: percentile(abs, 0.95), BiasP50Ms: percentile(bias, 0.5),
		OldAbsErrP50Ms: percentile(oldAbs, 0.5), OldAbsErrP95Ms: percentile(oldAbs, 0.95), OldBiasP50Ms: percentile(oldBias, 0.5)}
}

func absInt(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// ServerCounts are issuer room counters.
type ServerCounts struct {
	Entered   int64 `json:"entered"`
	Admitted  int64 `json:"admitted"`
	FastTrack int64 `json:"fast_track"`
	Expired   int64 `json:"expired"`
	// NotClaimed: expired unclaimed at the arrival window (part of Expired).
	NotClaimed int64 `json:"not_claimed"`
	Completed  int64 `json:"completed"`
	// PriorityAdmitted, Bypassed and InvitesUsed are the lane counters.
	PriorityAdmitted int64 `json:"priority_admitted"`
	Bypassed         int64 `json:"bypassed"`
	InvitesUsed      int64 `json:"invites_used"`
	Waiting          int64 `json:"waiting"` // at the end
	Active           int64 `json:"live"`    // at the end
}

func (s *sim) report(buyers []*buyer, before, after *server.Stats, elapsed time.Duration, ctxErr error) *Report {
	o := s.o
	r := &Report{Room: o.Room, Store: s.env.store, Seed: o.Seed, Users: len(buyers),
		Capacity: o.Capacity, RatePerMinute: o.RatePerMinute, DurationMs: elapsed.Milliseconds(),
		TimedOut: ctxErr != nil, Rejections: map[string]int64{}, ArrivalWindowMs: max(0, o.ArrivalWindow.Milliseconds())}
	if o.ArrivalWindow >= o.SessionDuration {
		r.ArrivalWindowMs = 0 // no effect: as off
	}

	var recs []*admission
	var waits, closedIn []int64
	seen := map[string]bool{}
	var so *SoldOutReport
	if at := s.soldOutAt.Load(); at != 0 {
		so = &SoldOutReport{After: o.SoldOutAfter, AtMs: time.Unix(0, at).Sub(s.start).Milliseconds()}
	}
	for _, b := range buyers {
		if so != nil && !b.closedAt.IsZero() {
			so.Closed++
			if b.closedReason != "sold_out" {
				so.WrongReason++
			}
			closedIn = append(closedIn, max(0, b.closedAt.Sub(time.Unix(0, s.soldOutAt.Load())).Milliseconds()))
		}
		if so != nil && b.refused {
			so.Refused++
		}
		if (b.role == roleBuyer || b.role == roleBad) && b.closedAt.IsZero() && !b.refused {
			r.ExpectedOrders++
		}
		switch b.role {
		case roleAbandon:
			r.Abandoned++
		case roleBad:
			r.BadActors++
		case roleTabClose:
			r.TabClosed++
			for _, a := range b.admissions { // from closedTabs: never seen by the buyer
				r.TabClosedAdmitted++
				r.IdleSlotMs += a.expiresAtMs - a.admittedAtMs
				r.IdleSlotSeconds = float64(r.IdleSlotMs) / 1000
				recs = append(recs, a)
			}
			continue
		}
		if b.failed {
			r.Errors++
		}
		if len(b.admissions) > 0 {
			r.Admitted++
		}
		for _, a := range b.admissions {
			// A buyer whose token lapsed in its last second re-enters and is
			// handed the same (still live) admission: one admission, one record.
			if a.id != "" {
				if seen[a.id] {
					continue
				}
				seen[a.id] = true
			}
			recs = append(recs, a)
			waits = append(waits, a.activeAt.Sub(a.enteredAt).Milliseconds())
			if a.fastTrack {
				r.FastTrack++
			}
			if a.lost {
				r.LostAdmissions++
			}
		}
		if b.orders > 0 {
			r.Completed++
		}
		r.DoubleAdmissions += b.doubleAdmitted
		r.DoubleCompletions += max(b.orders-1, 0) + b.replayAccepted
		r.ForgedAccepted += b.forgedAccepted
	}
	r.Admissions = len(recs)
	r.PreQueue, r.PreQueueDeprecated = o.PreQueue, o.PreQueue
	order := func(arrival int64) int64 { return arrival } // the line's order: its waiting score
	if p := s.public; p != nil && p.view.Drawn {
		// The audit's public path: the room view (seed, epoch, cutoff) and
		// the buyers' receipts, never the admin API.
		l := p.view
		r.Lottery = &LotteryReport{Seed: l.Seed, Epoch: l.Epoch, Cutoff: l.Cutoff, Commitment: l.Commitment}
		r.Lottery.Receipts, r.Lottery.ReceiptsRefused, r.Lottery.MissingReceipts = p.checkReceipts(buyers)
		bits := issuer.LotteryBits(l.Cutoff)
		order = func(arrival int64) int64 {
			if arrival > l.Cutoff {
				return arrival
			}
			return issuer.LotteryScore(l.Seed, l.Epoch, bits, arrival)
		}
		r.Lottery.PreQueueAdmitted, r.Lottery.RankCorrelation = rankCorrelation(recs, l.Cutoff)
	}
	r.Lanes = laneReport(recs, o, order)
	r.FIFOViolations = fifoViolations(inLane(recs, flashgate.LanePublic), order) +
		fifoViolations(inLane(recs, flashgate.LanePriority), byArrival) // the lane is never drawn
	r.PeakActive = s.peakActive(recs)
	r.MaxAdmittedPerMinute = maxPerWindow(recs, 60_000)
	r.Estimate, r.EstimateAllReads = estimateError(recs, false), estimateError(recs, true)
	slices.Sort(waits)
	r.WaitP50Ms, r.WaitP95Ms = percentile(waits, 0.50), percentile(waits, 0.95)
	if len(waits) > 0 {
		r.WaitMaxMs = waits[len(waits)-1]
	}
	if s.env.orderStats != nil {
		st := s.env.orderStats()
		r.TokensVerified = st.Verified
		r.Rejections = st.Rejections
	}
	if so != nil {
		slices.Sort(closedIn)
		so.ClosedP50Ms, so.ClosedP95Ms = percentile(closedIn, 0.50), percentile(closedIn, 0.95)
		if len(closedIn) > 0 {
			so.ClosedMaxMs = closedIn[len(closedIn)-1]
		}
		if after != nil && before != nil {
			so.ClosedOut, so.WaitingAtEnd = after.ClosedOut-before.ClosedOut, after.Waiting
		}
		r.SoldOut = so
	}
	if after != nil && before != nil {
		r.ServerPeakActive = after.PeakActive
		r.Server = ServerCounts{Entered: after.Entered - before.Entered, Admitted: after.Admitted - before.Admitted,
			FastTrack: after.FastTrack - before.FastTrack, Expired: after.Expired - before.Expired,
			Completed: after.Completed - before.Completed, Waiting: after.Waiting, Active: after.Active,
			NotClaimed: after.NotClaimed - before.NotClaimed, PriorityAdmitted: after.PriorityAdmitted - before.PriorityAdmitted,
			Bypassed: after.Bypassed - before.Bypassed, InvitesUsed: after.InvitesUsed - before.InvitesUsed}
		// The server admitted more than the buyers saw: someone was admitted twice.
		if extra := int(r.Server.Admitted) - r.Admissions; extra > r.DoubleAdmissions && r.Errors == 0 {
			r.DoubleAdmissions = extra
		}
	}
	s.mu.Lock()
	r.ErrorSamples = slices.Clone(s.sample)
	s.mu.Unlock()

	if l := r.Lottery; l != nil && l.ReceiptsRefused+l.MissingReceipts > 0 {
		r.Violations = append(r.Violations, fmt.Sprintf("lottery: %d join receipts refused by the public check, %d pre-queue entries without one",
			l.ReceiptsRefused, l.MissingReceipts))
	}
	if r.FIFOViolations > 0 {
		r.Violations = append(r.Violations, fmt.Sprintf("FIFO: %d buyers admitted before someone who arrived earlier", r.FIFOViolations))
	}
	if r.Lanes != nil && r.Lanes.OrderViolations > 0 {
		r.Violations = append(r.Violations, fmt.Sprintf("lanes: %d priority entries admitted after a public one admitted while they waited", r.Lanes.OrderViolations))
	}
	if r.PeakActive > r.Capacity {
		r.Violations = append(r.Violations, fmt.Sprintf("capacity: %d admissions live at once, capacity %d", r.PeakActive, r.Capacity))
	}
	if r.ServerPeakActive > int64(r.Capacity) {
		r.Violations = append(r.Violations, fmt.Sprintf("capacity: the issuer saw %d live admissions, capacity %d", r.ServerPeakActive, r.Capacity))
	}
	if r.MaxAdmittedPerMinute > r.RatePerMinute {
		r.Violations = append(r.Violations, fmt.Sprintf("rate: %d admissions in one minute, rate %d", r.MaxAdmittedPerMinute, r.RatePerMinute))
	}
	if r.DoubleAdmissions > 0 {
		r.Violations = append(r.Violations, fmt.Sprintf("%d double admissions", r.DoubleAdmissions))
	}
	if r.ForgedAccepted > 0 {
		r.Violations = append(r.Violations, fmt.Sprintf("%d forged or foreign-product tokens accepted", r.ForgedAccepted))
	}
	if r.DoubleCompletions > 0 {
		r.Violations = append(r.Violations, fmt.Sprintf("%d orders completed twice", r.DoubleCompletions))
	}
	if o.SoldOutAfter > 0 && so == nil && s.ordered.Load() >= int64(o.SoldOutAfter) {
		r.Violations = append(r.Violations, fmt.Sprintf("sold out: %d orders went through but the sold-out after %d was never declared (errors: %v)",
			s.ordered.Load(), o.SoldOutAfter, r.ErrorSamples))
	}
	if so != nil && so.WrongReason > 0 {
		r.Violations = append(r.Violations, fmt.Sprintf("sold out: %d buyers saw CLOSED with another reason", so.WrongReason))
	}
	r.PlacesLost = int(s.placesLost.Load())
	r.OK = len(r.Violations) == 0 && r.Errors == 0 && !r.TimedOut
	if r.Violations == nil {
		r.Violations = []string{}
	}
	return r
}

// fifoViolations counts buyers whose admission number is lower than that of
// someone ahead of them in the line's order (running maximum in that
// order; order maps an arrival number to its place in the line's order).
func fifoViolations(recs []*admission, order func(arrival int64) int64) int {
	bs := slices.Clone(recs)
	sort.Slice(bs, func(i, j int) bool { return order(bs[i].arrival) < order(bs[j].arrival) })
	var hi int64
	n := 0
	for _, b := range bs {
		if b.number < hi {
			n++
		}
		hi = max(hi, b.number)
	}
	return n
}

// rankCorrelation is Spearman's ρ between arrival and admission number
// over the admissions of pre-queue entries (arrival ≤ cutoff), and how many
// there were.
func rankCorrelation(recs []*admission, cutoff int64) (int, float64) {
	var pre []*admission
	for _, a := range recs {
		if a.arrival <= cutoff {
			pre = append(pre, a)
		}
	}
	n := len(pre)
	if n < 2 {
		return n, 0
	}
	rank := map[*admission]float64{}
	sort.Slice(pre, func(i, j int) bool { return pre[i].number < pre[j].number })
	for i, a := range pre {
		rank[a] = float64(i)
	}
	sort.Slice(pre, func(i, j int) bool { return pre[i].arrival < pre[j].arrival })
	var d2 float64
	for i, a := range pre {
		d := float64(i) - rank[a]
		d2 += d * d
	}
	nf := float64(n)
	return n, 1 - 6*d2/(nf*(nf*nf-1))
}

// peakActive sweeps [admitted_at, end) intervals, end = the completion time
// when the order went through, else the admission's expiry; at equal times
// ends are processed before starts (an admission expiring at t is not live
// at t, as the issuer counts).
func (s *sim) peakActive(recs []*admission) int {
	type ev struct {
		at    int64
		delta int
	}
	evs := make([]ev, 0, 2*len(recs))
	for _, b := range recs {
		end := b.expiresAtMs
		if at, ok := s.env.completion(b.id); ok && at < end {
			end = at
		}
		evs = append(evs, ev{b.admittedAtMs, +1}, ev{end, -1})
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at != evs[j].at {
			return evs[i].at < evs[j].at
		}
		return evs[i].delta < evs[j].delta
	})
	live, peak := 0, 0
	for _, e := range evs {
		live += e.delta
		peak = max(peak, live)
	}
	return peak
}

// maxPerWindow is the most admissions in any window (t−window, t], the
// window the issuer's rate log uses.
func maxPerWindow(recs []*admission, window int64) int {
	ts := make([]int64, 0, len(recs))
	for _, b := range recs {
		ts = append(ts, b.admittedAtMs)
	}
	slices.Sort(ts)
	best, lo := 0, 0
	for hi, t := range ts {
		for ts[lo] <= t-window {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

func percentile(sorted []int64, q float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// WriteText writes the report as a human-readable table.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	ok := func(good bool) string {
		if good {
			return "ok"
		}
		return "VIOLATED"
	}
	ms := func(v int64) string { return (time.Duration(v) * time.Millisecond).Round(time.Millisecond).String() }
	fmt.Fprintf(w, "flashgate flash-sale simulation: room %s, %s\n\n", r.Room, r.Store)
	fmt.Fprintf(tw, "buyers\t%d\t(abandoning %d, bad actors %d, seed %d)\n", r.Users, r.Abandoned, r.BadActors, r.Seed)
	fmt.Fprintf(tw, "admitted\t%d\t(admissions %d, fast track %d, lapsed before use %d)\n", r.Admitted, r.Admissions, r.FastTrack, r.LostAdmissions)
	fmt.Fprintf(tw, "orders completed\t%d\t(expected %d)\n", r.Completed, r.ExpectedOrders)
	fmt.Fprintf(tw, "places lost\t%d\t(waiting tokens that read NOT_FOUND: the line lost the entry)\n", r.PlacesLost)
	if so := r.SoldOut; so != nil {
		fmt.Fprintf(tw, "sold out\tafter %d orders, at %s\t(%d waiting buyers ended CLOSED: sold-out → CLOSED seen p50 %s, p95 %s, max %s; %d enters refused after it; drained %d, %d still in line at the end)\n",
			so.After, ms(so.AtMs), so.Closed, ms(so.ClosedP50Ms), ms(so.ClosedP95Ms), ms(so.ClosedMaxMs), so.Refused, so.ClosedOut, so.WaitingAtEnd)
	}
	if r.TabClosed > 0 {
		window := "off"
		if r.ArrivalWindowMs > 0 {
			window = ms(r.ArrivalWindowMs)
		}
		fmt.Fprintf(tw, "closed tabs\t%d\t(admitted %d, idle slot-seconds %.1f, arrival window %s)\n",
			r.TabClosed, r.TabClosedAdmitted, r.IdleSlotSeconds, window)
	}
	if l := r.Lottery; l != nil {
		fmt.Fprintf(tw, "pre-queue lottery\t%d drawn\t(admitted %d; rank correlation arrival↔admission %.3f; seed %s)\n",
			l.Cutoff, l.PreQueueAdmitted, l.RankCorrelation, l.Seed)
		fmt.Fprintf(tw, "join receipts\t%d checked\t(refused %d, missing %d; public room view and JWKS only)\n",
			l.Receipts, l.ReceiptsRefused, l.MissingReceipts)
	}
	fmt.Fprintf(tw, "duration\t%s\t\n", ms(r.DurationMs))
	fmt.Fprintf(tw, "\t\t\n")
	fmt.Fprintf(tw, "invariants\t\t\n")
	line := "FIFO violations"
	if r.Lottery != nil {
		line = "order violations (drawn, then FIFO)"
	}
	fmt.Fprintf(tw, "  %s\t%d\t%s\n", line, r.FIFOViolations, ok(r.FIFOViolations == 0))
	fmt.Fprintf(tw, "  peak live admissions\t%d / %d capacity\t%s (issuer's counter: %d)\n", r.PeakActive, r.Capacity,
		ok(r.PeakActive <= r.Capacity && r.ServerPeakActive <= int64(r.Capacity)), r.ServerPeakActive)
	fmt.Fprintf(tw, "  max admitted in 60 s\t%d / %d rate\t%s\n", r.MaxAdmittedPerMinute, r.RatePerMinute, ok(r.MaxAdmittedPerMinute <= r.RatePerMinute))
	fmt.Fprintf(tw, "  double admissions\t%d\t%s\n", r.DoubleAdmissions, ok(r.DoubleAdmissions == 0))
	fmt.Fprintf(tw, "  forged tokens accepted\t%d\t%s\n", r.ForgedAccepted, ok(r.ForgedAccepted == 0))
	fmt.Fprintf(tw, "  orders completed twice\t%d\t%s\n", r.DoubleCompletions, ok(r.DoubleCompletions == 0))
	fmt.Fprintf(tw, "\t\t\n")
	fmt.Fprintf(tw, "wait (enter → admitted)\tp50 %s  p95 %s  max %s\t\n", ms(r.WaitP50Ms), ms(r.WaitP95Ms), ms(r.WaitMaxMs))
	if l := r.Lanes; l != nil {
		fmt.Fprintf(tw, "lane fairness\t\t(priority share %.3g, bypass share %.3g)\n", l.PriorityShare, l.BypassShare)
		for _, x := range []struct {
			name string
			st   LaneStats
		}{{"public", l.Public}, {"priority", l.Priority}, {"bypass", l.Bypass}} {
			fmt.Fprintf(tw, "  %s\tadmitted %d, FIFO violations %d\twait mean %s  p95 %s\n", x.name, x.st.Admitted,
				x.st.FIFOViolations, ms(x.st.WaitMeanMs), ms(x.st.WaitP95Ms))
		}
		fmt.Fprintf(tw, "  lane order violations\t%d\t%s (a priority entry admitted after a public one admitted while it waited)\n",
			l.OrderViolations, ok(l.OrderViolations == 0))
		fmt.Fprintf(tw, "  public lane held back\tby %d lane admissions\t(%s at the rate: the lanes' whole share)\n",
			l.LaneAdmissions, ms(l.PublicDelayBoundMs))
	}
	for _, x := range []struct {
		name string
		e    EstimateError
	}{{"first read", r.Estimate}, {"every read", r.EstimateAllReads}} {
		if x.e.Reads == 0 {
			continue
		}
		fmt.Fprintf(tw, "estimate error (%s)\t|error| p50 %s  p95 %s  bias %s\t(%d reads; wait from the read p50 %s  p95 %s)\n",
			x.name, ms(x.e.AbsErrorP50Ms), ms(x.e.AbsErrorP95Ms), ms(x.e.BiasP50Ms), x.e.Reads, ms(x.e.ActualP50Ms), ms(x.e.ActualP95Ms))
		fmt.Fprintf(tw, "  old formula, same reads\t|error| p50 %s  p95 %s  bias %s\t(ahead × 60 s / rate)\n",
			ms(x.e.OldAbsErrP50Ms), ms(x.e.OldAbsErrP95Ms), ms(x.e.OldBiasP50Ms))
	}
	fmt.Fprintf(tw, "tokens verified\t%d\t(by the order service, offline)\n", r.TokensVerified)
	reasons := make([]string, 0, len(r.Rejections))
	for k, v := range r.Rejections {
		reasons = append(reasons, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(reasons)
	if len(reasons) == 0 {
		reasons = []string{"none"}
	}
	fmt.Fprintf(tw, "rejections\t%s\t(order service, by reason)\n", strings.Join(reasons, ", "))
	if r.Errors > 0 {
		fmt.Fprintf(tw, "errors\t%d buyers did not finish\t\n", r.Errors)
		for _, e := range r.ErrorSamples {
			fmt.Fprintf(tw, "  e.g.\t%s\t\n", e)
		}
	}
	if r.TimedOut {
		fmt.Fprintf(tw, "timed out\tthe run hit its timeout\t\n")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "issuer counters: entered %d, admitted %d, fast track %d, expired %d (not claimed %d), completed %d; waiting %d, live %d at the end\n",
		r.Server.Entered, r.Server.Admitted, r.Server.FastTrack, r.Server.Expired, r.Server.NotClaimed, r.Server.Completed, r.Server.Waiting, r.Server.Active)
	if r.Lanes != nil {
		fmt.Fprintf(w, "lane counters: priority admitted %d, bypassed %d, invites used %d\n", r.Server.PriorityAdmitted, r.Server.Bypassed, r.Server.InvitesUsed)
	}
	if j := r.Journal; j != nil {
		if j.Report == nil {
			fmt.Fprintf(w, "journal %s: %s\n", j.Store, j.Disagrees)
		} else {
			verdict := "agrees with the issuer's counters"
			if !j.Agrees {
				verdict = "DISAGREES: " + j.Disagrees
			}
			fmt.Fprintf(w, "journal %s: entered %d, admitted %d, completed %d, abandoned %d, closed %d, live %d; wait p50 %s p95 %s; written %s after the last buyer; %s\n",
				j.Store, j.Report.Entered, j.Report.Admitted, j.Report.Completed, j.Report.Abandoned, j.Report.Closed,
				j.Report.Live, ms(int64(j.Report.Wait.P50Ms)), ms(int64(j.Report.Wait.P95Ms)), ms(j.CaughtUp), verdict)
			e := j.Report.Estimate
			fmt.Fprintf(w, "journal metrics: estimate error |error| p50 %s p90 %s, bias %s (%d admissions shown one); inversions %d, rate overshoots %d, capacity overshoots %d (checks skipped %d)\n",
				ms(int64(e.AbsP50Ms)), ms(int64(e.AbsP90Ms)), ms(int64(e.BiasMeanMs)), e.Admitted,
				j.Inversions, j.RateOvershoots, j.CapacityOvershoots, j.ChecksSkipped)
		}
	}
	fmt.Fprintln(w)
	var err error
	switch {
	case len(r.Violations) > 0:
		_, err = fmt.Fprintf(w, "RESULT: FAIL — %s\n", strings.Join(r.Violations, "; "))
	case !r.OK:
		_, err = fmt.Fprintf(w, "RESULT: INCOMPLETE — invariants hold, but not every buyer finished\n")
	default:
		_, err = fmt.Fprintf(w, "RESULT: PASS — every invariant held\n")
	}
	return err
}

// LaneReport is the lane fairness report: per lane, how many were admitted,
// FIFO within the lane, and the wait.
type LaneReport struct {
	PriorityShare float64   `json:"priority_share"`
	BypassShare   float64   `json:"bypass_share"`
	Public        LaneStats `json:"public"`
	Priority      LaneStats `json:"priority"`
	Bypass        LaneStats `json:"bypass"` // admitted at once by a bypass invite
	// OrderViolations counts priority entries admitted after a public entry
	// that was admitted while they already waited in the lane (enter
	// answered at least a second before it: clocks and ticks aside); 0 when
	// the lane goes first.
	OrderViolations int `json:"order_violations"`
	// LaneAdmissions is how many admissions went to the lanes (priority and
	// bypass): the most the public line is held back by. PublicDelayBoundMs
	// is that many admissions at the room's rate: what the lane share
	// implies for the public line's wait when the rate binds (when capacity
	// binds, the lanes' sessions hold it back instead).
	LaneAdmissions     int   `json:"lane_admissions"`
	PublicDelayBoundMs int64 `json:"public_delay_bound_ms"`
}

// LaneStats are one lane's numbers; the wait (enter answered → ACTIVE
// observed) counts the admissions the buyer saw while they were live.
type LaneStats struct {
	Admitted       int   `json:"admitted"`
	FIFOViolations int   `json:"fifo_violations"`
	WaitMeanMs     int64 `json:"wait_mean_ms"`
	WaitP95Ms      int64 `json:"wait_p95_ms"`
}

// byArrival is arrival order (fifoViolations).
func byArrival(arrival int64) int64 { return arrival }

func inLane(recs []*admission, lane string) []*admission {
	var out []*admission
	for _, a := range recs {
		if a.lane == lane || lane == flashgate.LanePublic && a.lane == "" {
			out = append(out, a)
		}
	}
	return out
}

// laneReport is the lane fairness report of recs, nil when no buyer held an invite.
// order is the public line's order (fifoViolations); the priority lane's is arrival order.
func laneReport(recs []*admission, o Options, order func(arrival int64) int64) *LaneReport {
	if o.PriorityShare <= 0 && o.BypassShare <= 0 {
		return nil
	}
	l := &LaneReport{PriorityShare: o.PriorityShare, BypassShare: o.BypassShare}
	stats := func(rs []*admission, order func(arrival int64) int64) LaneStats {
		st := LaneStats{Admitted: len(rs), FIFOViolations: fifoViolations(rs, order)}
		var waits []int64
		var sum int64
		for _, a := range rs {
			if a.activeAt.IsZero() || a.enteredAt.IsZero() || a.lost {
				continue // a closed tab's (never observed), or one seen only once it had lapsed
			}
			w := a.activeAt.Sub(a.enteredAt).Milliseconds()
			waits = append(waits, w)
			sum += w
		}
		if len(waits) > 0 {
			slices.Sort(waits)
			st.WaitMeanMs, st.WaitP95Ms = sum/int64(len(waits)), percentile(waits, 0.95)
		}
		return st
	}
	pub, pri, by := inLane(recs, flashgate.LanePublic), inLane(recs, flashgate.LanePriority), inLane(recs, flashgate.LaneBypass)
	l.Public, l.Priority, l.Bypass = stats(pub, order), stats(pri, byArrival), stats(by, byArrival)
	l.LaneAdmissions = len(pri) + len(by)
	l.PublicDelayBoundMs = int64(l.LaneAdmissions) * 60_000 / int64(max(o.RatePerMinute, 1))
	// A priority entry waiting (enter answered) a second before a public
	// admission must have been admitted before it.
	for _, p := range pri {
		if p.enteredAt.IsZero() {
			continue
		}
		waitingSince := p.enteredAt.UnixMilli() + 1000
		for _, q := range pub {
			if q.number > 0 && q.number < p.number && q.admittedAtMs > waitingSince {
				l.OrderViolations++
				break
			}
		}
	}
	return l
}

// JournalReport is the journal's account of the run (Options.Journal): the
// room's report from PostgreSQL (journal.Store.Report) once the journal
// process had written every event, and how long that took after the last
// buyer finished.
type JournalReport struct {
	Store     string          `json:"store"` // the PostgreSQL URL, password redacted
	CaughtUp  int64           `json:"caught_up_ms"`
	Report    *journal.Report `json:"report"`
	Agrees    bool            `json:"agrees"` // entered, admitted and completed equal the issuer's counters, and no inversion or overshoot
	Disagrees string          `json:"disagrees,omitempty"`
	// The journal process's must-be-0 counters at the end (its /metrics:
	// flashgate_order_inversions_total, flashgate_rate_overshoot_total,
	// flashgate_capacity_overshoot_total), and the overshoot checks it
	// skipped (flashgate_journal_limit_checks_skipped_total). Any of the
	// first three above 0 is a violation.
	Inversions         int64 `json:"inversions"`
	RateOvershoots     int64 `json:"rate_overshoots"`
	CapacityOvershoots int64 `json:"capacity_overshoots"`
	ChecksSkipped      int64 `json:"checks_skipped"`
}
