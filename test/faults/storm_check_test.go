package faults_test

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flashgate/flashgate"
)

// This file judges a storm from what its buyers saw — answers, their
// timestamps, and the issuer's own numbers inside them (arrival, admission,
// admission id, admitted_at_ms, expires_at_ms, completed_at_ms, all on the
// room's clock) — and from the fault timeline (when data was lost). It
// never reads Redis.

// The invariants, in the order the summary lists them.
const (
	vNoAnswer       = "no answer within the client timeout (10 s)"
	v5xx            = "5xx other than 503"
	vNoRetryAfter   = "503 without Retry-After"
	vSlow           = "answer after more than 3 s (a hung or dead Redis must become a prompt 503)"
	vOwnerMismatch  = "403 token_owner_mismatch for the buyer's own token"
	vOtherRoom      = "answer names another room"
	vOtherEntry     = "status answers for another entry (arrival differs from the token's)"
	vVanished       = "entry or admission vanished without a data loss (NOT_FOUND / 404)"
	vLostWaiting    = "WAITING for an entry lost with the data (request sent after the restart)"
	vNeverBought    = "COMPLETED or REVOKED for an entry this buyer never completed (nobody revokes)"
	vRepeatedNever  = "200 repeated:true for a purchase this buyer never completed"
	vTwice          = "one admission completed twice (two non-repeated 200s)"
	vRepeatDiffers  = "a repeated completion answered another time or admission"
	vOldCompleted   = "admission from before the data loss completed after it"
	vBadID          = "malformed admission id, or one that disagrees with the entry"
	vIDReuse        = "one admission id or arrival/admission number for two admissions or users (same epoch)"
	vExchangeOther  = "exchange minted another admission than status showed"
	vFIFO           = "FIFO: admitted before an earlier arrival of the same epoch"
	vOverCapacity   = "live admissions above capacity (same epoch)"
	vOverRate       = "admissions in a 60 s window above the rate"
	maxExamples     = 4
	minAdmittedBase = 20 // a scenario that admits fewer tested nothing
)

var violationOrder = []string{vNoAnswer, vSlow, v5xx, vNoRetryAfter, vOwnerMismatch, vOtherRoom, vOtherEntry,
	vVanished, vLostWaiting, vNeverBought, vRepeatedNever, vTwice, vRepeatDiffers, vOldCompleted, vBadID,
	vIDReuse, vExchangeOther, vFIFO, vOverCapacity, vOverRate}

// stormSpec is what the checks need to know about a run.
type stormSpec struct {
	name     string
	rooms    []string // each with capacity and rate
	capacity int
	rate     int
	session  time.Duration
	start    time.Time
	// dataLoss: Redis was SIGKILLed, and restarted empty at restartAt; it
	// answered again at restoredAt. Nothing answered between the kill and
	// restartAt, so an answer received before restartAt (even one received
	// after the kill: a reply in flight) came from the lost data, and
	// entries entered and admissions first seen then belong to it. Entries
	// entered after restoredAt belong to the new store; the few in between
	// are judged by neither rule. Requests sent after restoredAt meet the
	// new store.
	dataLoss   bool
	restartAt  time.Time
	restoredAt time.Time
}

// admission is one admission id as the buyers saw it.
type admission struct {
	room             string
	jti              string
	epoch            string
	arrival, number  int64
	admittedMs       int64
	expiresMs        int64
	completedMs      int64 // 0: no completion seen
	users            map[string]bool
	firstSeen        time.Time
	firstCompletions int
}

// outcome is a storm's result: counts for the summary and violations.
type outcome struct {
	spec         stormSpec
	requests     int
	byOp         map[string]map[string]int
	latency      map[string][]time.Duration // by op, and by op+" 503"
	buyers       int
	ends         map[string]int
	admitted     int
	fastTrack    int
	completed    int
	maxLive      int
	maxLiveNote  string
	maxPerMin    int
	max10s       int
	fifo         int
	unsettled    int
	count        map[string]int
	examples     map[string][]string
	faults       []string
	replicaErrs  int
	replicaLines []string
	notes        []string
	transport    []string // examples of transport errors (not violations: a killed replica)
}

func (o *outcome) violate(kind, example string) {
	o.count[kind]++
	if len(o.examples[kind]) < maxExamples {
		o.examples[kind] = append(o.examples[kind], example)
	}
}

func (o *outcome) failed() bool {
	for _, n := range o.count {
		if n > 0 {
			return true
		}
	}
	return false
}

// describe names a call for an example line.
func (o *outcome) describe(c *call) string {
	at := c.sent.Sub(o.spec.start).Seconds()
	s := fmt.Sprintf("t=%.2fs %s (room %s) %s via replica %d", at, c.b.user, o.spec.rooms[c.b.room], c.op, c.replica)
	if c.v != nil {
		s += fmt.Sprintf(" (entry arrival %d", c.v.arrival)
		if c.jti != "" {
			s += ", admission " + c.jti
		}
		s += ")"
	}
	switch {
	case c.status == 0:
		return s + fmt.Sprintf(" after %s: %s", c.got.Sub(c.sent).Round(time.Millisecond), c.err)
	default:
		return s + fmt.Sprintf(" after %s: %d %s", c.got.Sub(c.sent).Round(time.Millisecond), c.status, c.body)
	}
}

// check judges the buyers' records.
func check(spec stormSpec, buyers []*buyer) *outcome {
	o := &outcome{spec: spec, byOp: map[string]map[string]int{}, buyers: len(buyers), ends: map[string]int{},
		latency: map[string][]time.Duration{},
		count:   map[string]int{}, examples: map[string][]string{}}
	adms := map[string]*admission{}
	sentComplete, settled := map[string]bool{}, map[string]bool{}
	var completedAfterLoss []*call
	// lostEntry: the entry was made before the data loss; newEntry: it was
	// made in the store the buyer is talking to.
	lostEntry := func(v *visit) bool {
		return spec.dataLoss && v != nil && v.enteredAt.Before(spec.restartAt)
	}
	newEntry := func(v *visit) bool {
		return !spec.dataLoss || v != nil && !v.enteredAt.Before(spec.restoredAt)
	}
	afterLoss := func(c *call) bool { return spec.dataLoss && c.sent.After(spec.restoredAt) }
	// see records an admission id from an answer and checks it against the
	// entry's own members (ACTIVE answers).
	see := func(c *call, jti string, r *reply, entry bool) *admission {
		id, ok := flashgate.ParseAdmissionID(jti)
		if !ok {
			o.violate(vBadID, o.describe(c))
			return nil
		}
		room := spec.rooms[c.b.room]
		a := adms[akey(room, jti)]
		if a == nil {
			a = &admission{room: room, jti: jti, epoch: id.Epoch, arrival: id.Arrival, number: id.Number,
				admittedMs: id.AdmittedAt.UnixMilli(),
				users:      map[string]bool{}, firstSeen: c.got}
			adms[akey(room, jti)] = a
		}
		if c.got.Before(a.firstSeen) {
			a.firstSeen = c.got
		}
		a.users[c.b.user] = true
		if entry && (r.Arrival != id.Arrival || r.Admission != id.Number || r.AdmittedAtMs != id.AdmittedAt.UnixMilli()) {
			o.violate(vBadID, o.describe(c))
		}
		if entry && r.ExpiresAtMs > 0 {
			a.expiresMs = r.ExpiresAtMs
		}
		return a
	}

	for _, b := range buyers {
		o.ends[b.done]++
		firstAnswer := map[string]*call{} // jti → first 200 completion this buyer got
		for _, c := range b.calls {
			o.requests++
			if o.byOp[c.op] == nil {
				o.byOp[c.op] = map[string]int{}
			}
			o.byOp[c.op][statusKey(c)]++
			if c.status != 0 {
				o.latency[c.op] = append(o.latency[c.op], c.got.Sub(c.sent))
				if c.status == http.StatusServiceUnavailable {
					o.latency[c.op+" 503"] = append(o.latency[c.op+" 503"], c.got.Sub(c.sent))
				}
			}

			// Answers every request must respect.
			if c.status != 0 && c.got.Sub(c.sent) > answerWithin {
				o.violate(vSlow, o.describe(c))
			}
			switch {
			case c.timeout:
				o.violate(vNoAnswer, o.describe(c))
			case c.status == 0 && !c.cut && len(o.transport) < 3:
				o.transport = append(o.transport, o.describe(c))
			case c.status >= 500 && c.status != http.StatusServiceUnavailable:
				o.violate(v5xx, o.describe(c))
			case c.status == http.StatusServiceUnavailable && c.retry == "":
				o.violate(vNoRetryAfter, o.describe(c))
			case c.status == http.StatusForbidden && c.r.Code == "token_owner_mismatch":
				o.violate(vOwnerMismatch, o.describe(c))
			}
			if c.status == http.StatusOK && (c.op == "enter" || c.op == "status") && c.r.Room != spec.rooms[c.b.room] {
				o.violate(vOtherRoom, o.describe(c))
			}
			if c.op == "status" && c.status == http.StatusOK && c.v != nil && c.r.Arrival != c.v.arrival {
				o.violate(vOtherEntry, o.describe(c))
			}

			// Entries and admissions do not vanish, except with the data.
			gone := c.status == http.StatusNotFound || (c.status == http.StatusOK && c.r.State == "NOT_FOUND")
			if gone && (c.op == "enter" || newEntry(c.v)) {
				o.violate(vVanished, o.describe(c))
			}
			if c.op == "status" && c.status == http.StatusOK && c.r.State == "WAITING" && lostEntry(c.v) && afterLoss(c) {
				o.violate(vLostWaiting, o.describe(c))
			}
			// Buyers never ask about an entry after completing it, and nobody revokes.
			if (c.op == "status" || c.op == "enter") && c.status == http.StatusOK &&
				(c.r.State == "COMPLETED" || c.r.State == "REVOKED") ||
				c.op == "exchange" && (c.r.Code == "completed" || c.r.Code == "revoked") ||
				c.op == "complete" && c.r.Code == "revoked" {
				o.violate(vNeverBought, o.describe(c))
			}

			if c.op == "complete" {
				k := akey(spec.rooms[c.b.room], c.jti)
				sentComplete[k] = true
				if c.definitive() {
					settled[k] = true
				}
			}
			if c.status != http.StatusOK {
				continue
			}
			switch c.op {
			case "enter", "status":
				if c.r.AdmissionID != "" {
					a := see(c, c.r.AdmissionID, &c.r, c.r.State == "ACTIVE")
					if a != nil && c.op == "enter" && c.r.State == "ACTIVE" && c.v != nil && c.v.arrival == a.arrival {
						o.fastTrack++
					}
				}
			case "exchange":
				if c.v != nil && c.v.jti != "" && c.r.AdmissionID != c.v.jti {
					o.violate(vExchangeOther, o.describe(c))
				}
				if a := see(c, c.r.AdmissionID, &c.r, false); a != nil && c.r.Admission != a.number {
					o.violate(vBadID, o.describe(c))
				}
			case "complete":
				if c.r.AdmissionID != c.jti {
					o.violate(vRepeatDiffers, o.describe(c))
				}
				a := see(c, c.jti, &c.r, false)
				if a == nil {
					continue
				}
				if c.r.Repeated && !c.sentBefore {
					o.violate(vRepeatedNever, o.describe(c))
				}
				if !c.r.Repeated {
					a.firstCompletions++
					if a.firstCompletions == 2 {
						o.violate(vTwice, o.describe(c))
					}
				}
				if first := firstAnswer[c.jti]; first == nil {
					firstAnswer[c.jti] = c
				} else if first.r.CompletedAtMs != c.r.CompletedAtMs {
					o.violate(vRepeatDiffers, o.describe(c)+fmt.Sprintf(" (first answer: completed_at_ms %d)", first.r.CompletedAtMs))
				}
				if a.completedMs == 0 || c.r.CompletedAtMs < a.completedMs {
					a.completedMs = c.r.CompletedAtMs
				}
				if spec.dataLoss && afterLoss(c) {
					completedAfterLoss = append(completedAfterLoss, c)
				}
			}
		}
	}
	for _, c := range completedAfterLoss {
		if a := adms[akey(spec.rooms[c.b.room], c.jti)]; a != nil && a.firstSeen.Before(spec.restartAt) {
			o.violate(vOldCompleted, o.describe(c))
		}
	}
	for k := range sentComplete {
		if !settled[k] {
			o.unsettled++
		}
	}

	// The admissions themselves.
	all := make([]*admission, 0, len(adms))
	for _, a := range adms {
		all = append(all, a)
		if a.expiresMs == 0 {
			a.expiresMs = a.admittedMs + spec.session.Milliseconds()
		}
		if a.completedMs > 0 {
			o.completed++
		}
		if len(a.users) > 1 {
			o.violate(vIDReuse, fmt.Sprintf("room %s: admission %s reported to %v", a.room, a.jti, slices.Sorted(mapKeys(a.users))))
		}
	}
	o.admitted = len(all)
	sort.Slice(all, func(i, j int) bool { return akey(all[i].room, all[i].jti) < akey(all[j].room, all[j].jti) })
	for _, room := range spec.rooms {
		byEpoch := map[string][]*admission{}
		var inRoom []*admission
		for _, a := range all {
			if a.room == room {
				byEpoch[a.epoch] = append(byEpoch[a.epoch], a)
				inRoom = append(inRoom, a)
			}
		}
		epochs := slices.Sorted(mapKeys(byEpoch))
		for _, ep := range epochs {
			group := fmt.Sprintf("room %s epoch %q", room, ep)
			list := byEpoch[ep]
			checkNumbers(o, group, list)
			checkFIFO(o, group, list)
			checkLive(o, group, list)
		}
		checkRate(o, room, inRoom)
		if len(epochs) > 1 || (len(epochs) == 1 && epochs[0] != "") {
			o.notes = append(o.notes, fmt.Sprintf("room %s: epochs seen %q", room, epochs))
		}
	}
	return o
}

// akey is an admission's key: admission ids are per room.
func akey(room, jti string) string { return room + " " + jti }

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// checkNumbers: within an epoch an arrival is admitted once and an
// admission number is given once.
func checkNumbers(o *outcome, group string, list []*admission) {
	byArrival, byNumber := map[int64]*admission{}, map[int64]*admission{}
	for _, a := range list {
		if b := byArrival[a.arrival]; b != nil {
			o.violate(vIDReuse, fmt.Sprintf("%s: arrival %d admitted twice: %s (%v) and %s (%v)",
				group, a.arrival, b.jti, slices.Sorted(mapKeys(b.users)), a.jti, slices.Sorted(mapKeys(a.users))))
		}
		byArrival[a.arrival] = a
		if b := byNumber[a.number]; b != nil {
			o.violate(vIDReuse, fmt.Sprintf("%s: admission #%d given twice: %s (%v) and %s (%v)",
				group, a.number, b.jti, slices.Sorted(mapKeys(b.users)), a.jti, slices.Sorted(mapKeys(a.users))))
		}
		byNumber[a.number] = a
	}
}

// checkFIFO: sorted by arrival, admission numbers rise. An admission whose
// number is below that of an earlier arrival overtook it.
func checkFIFO(o *outcome, group string, list []*admission) {
	s := slices.Clone(list)
	sort.Slice(s, func(i, j int) bool { return s[i].arrival < s[j].arrival })
	var top *admission
	for _, a := range s {
		if top != nil && a.number < top.number && a.arrival != top.arrival {
			o.fifo++
			o.violate(vFIFO, fmt.Sprintf("%s: arrival %d (%v, %s) admitted as #%d, before arrival %d (%v, %s) admitted as #%d",
				group, a.arrival, slices.Sorted(mapKeys(a.users)), a.jti, a.number,
				top.arrival, slices.Sorted(mapKeys(top.users)), top.jti, top.number))
		}
		if top == nil || a.number > top.number {
			top = a
		}
	}
}

// checkLive: the largest number of admissions of one epoch live at once,
// each live over [admitted_at, min(expiry, completed_at)) on the room's
// clock, never exceeds capacity.
func checkLive(o *outcome, group string, list []*admission) {
	type ev struct {
		at    int64
		delta int
	}
	var evs []ev
	for _, a := range list {
		end := a.expiresMs
		if a.completedMs > 0 && a.completedMs < end {
			end = a.completedMs
		}
		if end <= a.admittedMs {
			continue
		}
		evs = append(evs, ev{a.admittedMs, 1}, ev{end, -1})
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at != evs[j].at {
			return evs[i].at < evs[j].at
		}
		return evs[i].delta < evs[j].delta // ends first: intervals are half-open
	})
	live, peak, peakAt := 0, 0, int64(0)
	for _, e := range evs {
		live += e.delta
		if live > peak {
			peak, peakAt = live, e.at
		}
	}
	if peak > o.maxLive {
		o.maxLive = peak
		o.maxLiveNote = fmt.Sprintf("%s, room clock %d", group, peakAt)
	}
	if peak > o.spec.capacity {
		var at []string
		for _, a := range list {
			end := a.expiresMs
			if a.completedMs > 0 && a.completedMs < end {
				end = a.completedMs
			}
			if a.admittedMs <= peakAt && peakAt < end && len(at) < 6 {
				at = append(at, a.jti)
			}
		}
		o.violate(vOverCapacity, fmt.Sprintf("%s: %d live at room clock %d (capacity %d), e.g. %v",
			group, peak, peakAt, o.spec.capacity, at))
	}
}

// checkRate: a room's admissions (all epochs) in any 60 s window ≤ rate;
// the largest count in any 10 s window is reported too.
func checkRate(o *outcome, room string, all []*admission) {
	ts := make([]int64, 0, len(all))
	for _, a := range all {
		ts = append(ts, a.admittedMs)
	}
	slices.Sort(ts)
	window := func(ms int64) int {
		best, lo := 0, 0
		for hi := range ts {
			for ts[hi]-ts[lo] >= ms {
				lo++
			}
			best = max(best, hi-lo+1)
		}
		return best
	}
	perMin := window(60_000)
	o.maxPerMin, o.max10s = max(o.maxPerMin, perMin), max(o.max10s, window(10_000))
	if perMin > o.spec.rate {
		o.violate(vOverRate, fmt.Sprintf("room %s: %d admissions within 60 s (rate %d)", room, perMin, o.spec.rate))
	}
}

// statusKey classifies an answer for the request table.
func statusKey(c *call) string {
	switch {
	case c.timeout:
		return "timeout"
	case c.cut:
		return "cut by the end of the run"
	case c.status == 0:
		return "transport"
	case c.status == http.StatusOK && c.op == "complete" && c.r.Repeated:
		return "200 repeated"
	case c.status == http.StatusOK && c.r.State != "":
		return "200 " + c.r.State
	case c.r.Code != "":
		return strconv.Itoa(c.status) + " " + c.r.Code
	}
	return strconv.Itoa(c.status)
}

// summary renders the outcome for the test log.
func (o *outcome) summary() string {
	var b strings.Builder
	sp := o.spec
	fmt.Fprintf(&b, "storm %s: %d buyers in %d rooms (each: capacity %d, rate %d/min, session %s), 2 replicas\n",
		sp.name, o.buyers, len(sp.rooms), sp.capacity, sp.rate, sp.session)
	if len(o.faults) == 0 {
		b.WriteString("faults: none\n")
	}
	for _, f := range o.faults {
		fmt.Fprintf(&b, "fault: %s\n", f)
	}
	fmt.Fprintf(&b, "requests %d\n", o.requests)
	for _, op := range []string{"enter", "status", "exchange", "complete"} {
		m := o.byOp[op]
		keys := slices.Sorted(mapKeys(m))
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s ×%d", k, m[k]))
		}
		fmt.Fprintf(&b, "  %-9s %s\n", op, strings.Join(parts, ", "))
		if l := o.latency[op]; len(l) > 0 {
			slices.Sort(l)
			fmt.Fprintf(&b, "  %-9s answered in p50 %s, p99 %s, max %s", "", l[len(l)/2].Round(time.Millisecond),
				l[len(l)*99/100].Round(time.Millisecond), l[len(l)-1].Round(time.Millisecond))
			if l503 := o.latency[op+" 503"]; len(l503) > 0 {
				slices.Sort(l503)
				fmt.Fprintf(&b, "; 503s in p50 %s, max %s", l503[len(l503)/2].Round(time.Millisecond),
					l503[len(l503)-1].Round(time.Millisecond))
			}
			b.WriteString("\n")
		}
	}
	endKeys := slices.Sorted(mapKeys(o.ends))
	ends := make([]string, 0, len(endKeys))
	for _, k := range endKeys {
		ends = append(ends, fmt.Sprintf("%s ×%d", k, o.ends[k]))
	}
	fmt.Fprintf(&b, "buyers: %s\n", strings.Join(ends, ", "))
	fmt.Fprintf(&b, "admitted %d (ACTIVE at enter %d), completed %d, completions left unsettled %d\n",
		o.admitted, o.fastTrack, o.completed, o.unsettled)
	mark := func(bad bool) string {
		if bad {
			return "VIOLATED"
		}
		return "ok"
	}
	fmt.Fprintf(&b, "max live (any room) %d / %d capacity (%s)  %s\n", o.maxLive, sp.capacity, o.maxLiveNote,
		mark(o.count[vOverCapacity] > 0))
	fmt.Fprintf(&b, "max admitted in 60 s (any room) %d / %d rate (in 10 s: %d)  %s\n", o.maxPerMin, sp.rate, o.max10s,
		mark(o.count[vOverRate] > 0))
	fmt.Fprintf(&b, "FIFO violations %d  %s\n", o.fifo, mark(o.fifo > 0))
	for _, ex := range o.transport {
		fmt.Fprintf(&b, "transport error (retried on the other replica), e.g. %s\n", ex)
	}
	for _, n := range o.notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	if o.replicaErrs > 0 {
		fmt.Fprintf(&b, "replica log lines at level ERROR: %d, e.g.\n", o.replicaErrs)
		for _, l := range o.replicaLines {
			fmt.Fprintf(&b, "    %s\n", l)
		}
	}
	if !o.failed() {
		b.WriteString("invariants: all held\n")
		return b.String()
	}
	b.WriteString("invariant violations:\n")
	for _, k := range violationOrder {
		if o.count[k] == 0 {
			continue
		}
		fmt.Fprintf(&b, "  VIOLATION %s: %d\n", k, o.count[k])
		for _, ex := range o.examples[k] {
			fmt.Fprintf(&b, "      e.g. %s\n", ex)
		}
	}
	return b.String()
}

// line is the outcome in one row of the final table.
func (o *outcome) line() string {
	var bad []string
	for _, k := range violationOrder {
		if o.count[k] > 0 {
			bad = append(bad, fmt.Sprintf("%s ×%d", shortName(k), o.count[k]))
		}
	}
	verdict := "PASS"
	if len(bad) > 0 {
		verdict = "FAIL: " + strings.Join(bad, "; ")
	}
	return fmt.Sprintf("%-17s req %5d  admitted %3d  completed %3d  live %2d/%d  60s %3d/%d  FIFO %d  %s",
		o.spec.name, o.requests, o.admitted, o.completed, o.maxLive, o.spec.capacity, o.maxPerMin, o.spec.rate,
		o.fifo, verdict)
}

func shortName(kind string) string {
	if i := strings.IndexAny(kind, "(:"); i > 0 && kind[:i] != "" {
		return strings.TrimSpace(kind[:i])
	}
	return kind
}
