package faults_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/flashgate/flashgate"
)

// TestStormChecks feeds the storm's checks made-up histories, so that a
// check that cannot fail (or fails on a good history) is caught here and
// not by a storm that happens to pass.
func TestStormChecks(t *testing.T) {
	t0 := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	ms := t0.UnixMilli()
	const room = "r"
	spec := stormSpec{name: "unit", rooms: []string{room}, capacity: 2, rate: 600, session: 6 * time.Second, start: t0}

	// history builds buyers from scripted answers.
	type step struct {
		user     string
		op       string
		at       time.Duration // sent at t0+at, answered 1 ms later
		status   int
		r        reply
		entry    int // the buyer's visit (1-based, 0: none); an enter with entry n creates visit n
		jti      string
		sentOnce bool   // complete: an earlier completion was sent for jti
		retry    string // Retry-After
	}
	history := func(steps ...step) []*buyer {
		byUser := map[string]*buyer{}
		var out []*buyer
		for _, s := range steps {
			b := byUser[s.user]
			if b == nil {
				b = &buyer{user: s.user, complete: map[string]int{}}
				byUser[s.user] = b
				out = append(out, b)
			}
			c := &call{b: b, op: s.op, sent: t0.Add(s.at), got: t0.Add(s.at + time.Millisecond), status: s.status,
				r: s.r, jti: s.jti, sentBefore: s.sentOnce, retry: s.retry}
			if s.r.Room == "" && (s.op == "enter" || s.op == "status") {
				c.r.Room = room
			}
			if s.op == "enter" && s.status == 200 && s.entry > len(b.visits) {
				b.visits = append(b.visits, &visit{token: fmt.Sprint(s.r.Arrival), arrival: s.r.Arrival, enteredAt: c.got})
			}
			if s.entry > 0 {
				c.v = b.visits[s.entry-1]
			}
			b.calls = append(b.calls, c)
		}
		return out
	}
	active := func(epoch string, arrival, number int64, at time.Duration) reply {
		admitted := ms + at.Milliseconds()
		if epoch == "" {
			epoch = "e0" // one epoch: no data loss in the history
		}
		id := fmt.Sprintf("%s.%d.%d.%d", epoch, arrival, number, admitted)
		return reply{State: "ACTIVE", Arrival: arrival, AdmissionID: id, Admission: number, AdmittedAtMs: admitted,
			ExpiresAtMs: admitted + 6000}
	}
	waiting := func(arrival int64) reply { return reply{State: "WAITING", Arrival: arrival} }

	t.Run("a good history passes", func(t *testing.T) {
		a1, a2 := active("", 1, 1, 0), active("", 2, 2, 100*time.Millisecond)
		o := check(spec, history(
			step{user: "u1", op: "enter", status: 200, r: a1, entry: 1},
			step{user: "u2", op: "enter", at: 50 * time.Millisecond, status: 200, r: waiting(2), entry: 1},
			step{user: "u2", op: "status", at: 200 * time.Millisecond, status: 200, r: a2, entry: 1},
			step{user: "u1", op: "complete", at: time.Second, status: 200, entry: 1, jti: a1.AdmissionID,
				r: reply{State: "COMPLETED", AdmissionID: a1.AdmissionID, CompletedAtMs: ms + 1000}},
			step{user: "u1", op: "complete", at: 1100 * time.Millisecond, status: 200, entry: 1, jti: a1.AdmissionID,
				sentOnce: true, r: reply{State: "COMPLETED", AdmissionID: a1.AdmissionID, CompletedAtMs: ms + 1000, Repeated: true}},
			step{user: "u3", op: "enter", at: 1200 * time.Millisecond, status: 503, retry: "1", r: reply{Code: "unavailable"}},
		))
		assert.False(t, o.failed(), o.summary())
		assert.Equal(t, 2, o.admitted)
		assert.Equal(t, 1, o.completed)
		assert.Equal(t, 2, o.maxLive)
	})

	t.Run("each violation is seen", func(t *testing.T) {
		a1, a2, a3 := active("", 1, 2, 0), active("", 2, 1, 10*time.Millisecond), active("", 3, 3, 20*time.Millisecond)
		slow := step{user: "u9", op: "status", at: 0, status: 200, r: waiting(9), entry: 1}
		o := check(spec, history(
			step{user: "u1", op: "enter", status: 200, r: a1, entry: 1},
			step{user: "u2", op: "enter", status: 200, r: a2, entry: 1}, // arrival 2 admitted before arrival 1
			step{user: "u3", op: "enter", status: 200, r: a3, entry: 1}, // a third live one: capacity 2
			step{user: "u3", op: "complete", at: time.Second, status: 200, entry: 1, jti: a3.AdmissionID,
				r: reply{State: "COMPLETED", AdmissionID: a3.AdmissionID, CompletedAtMs: ms + 1000, Repeated: true}},
			step{user: "u1", op: "status", status: 500, entry: 1, r: reply{Code: "internal"}},
			step{user: "u1", op: "status", status: 503, entry: 1, r: reply{Code: "unavailable"}},
			step{user: "u1", op: "status", status: 403, entry: 1, r: reply{Code: "token_owner_mismatch"}},
			step{user: "u2", op: "status", status: 200, entry: 1, r: reply{State: "NOT_FOUND", Arrival: 2}},
			step{user: "u9", op: "enter", status: 200, r: waiting(9), entry: 1},
			slow,
		))
		// The slow answer: sent at 0, answered after 4 s.
		o2 := check(spec, func() []*buyer {
			bs := history(step{user: "u9", op: "enter", status: 200, r: waiting(9), entry: 1}, slow)
			bs[0].calls[1].got = t0.Add(4 * time.Second)
			return bs
		}())
		for _, k := range []string{vFIFO, vOverCapacity, vRepeatedNever, v5xx, vNoRetryAfter, vOwnerMismatch, vVanished} {
			assert.Positive(t, o.count[k], "%s\n%s", k, o.summary())
		}
		assert.Positive(t, o2.count[vSlow], o2.summary())
	})

	t.Run("epochs and data loss", func(t *testing.T) {
		loss := spec
		loss.dataLoss, loss.restartAt, loss.restoredAt = true, t0.Add(2*time.Second), t0.Add(2500*time.Millisecond)
		// Before the loss: epoch e1, arrivals 1 and 2 admitted, live until
		// their expiry. After it: epoch e2 starts again at 1, and two more
		// are live at once — four overlapping admissions, two per epoch.
		o1, o2 := active("e1", 1, 1, 0), active("e1", 2, 2, 0)
		n1, n2 := active("e2", 1, 1, 3*time.Second), active("e2", 2, 2, 3*time.Second)
		good := check(loss, history(
			step{user: "u1", op: "enter", status: 200, r: o1, entry: 1},
			step{user: "u2", op: "enter", status: 200, r: o2, entry: 1},
			step{user: "u3", op: "enter", at: 3 * time.Second, status: 200, r: n1, entry: 1},
			step{user: "u4", op: "enter", at: 3 * time.Second, status: 200, r: n2, entry: 1},
			// Old entries: gone, as they should be.
			step{user: "u1", op: "complete", at: 4 * time.Second, status: 404, entry: 1, jti: o1.AdmissionID, r: reply{Code: "not_found"}},
			step{user: "u2", op: "status", at: 4 * time.Second, status: 200, entry: 1, r: reply{State: "NOT_FOUND", Arrival: 2}},
		))
		assert.False(t, good.failed(), good.summary())
		assert.Equal(t, 2, good.maxLive, "epochs are counted apart")

		// The same with one epoch on both sides of the loss (ids reused), and
		// the old buyers told WAITING and COMPLETED after the loss.
		strip := func(r reply) reply { r.AdmissionID = "e0" + r.AdmissionID[2:]; return r }
		o1, o2, n1, n2 = strip(o1), strip(o2), strip(n1), strip(n2)
		bad := check(loss, history(
			step{user: "u1", op: "enter", status: 200, r: o1, entry: 1},
			step{user: "u2", op: "enter", status: 200, r: waiting(2), entry: 1},
			step{user: "u3", op: "enter", at: 3 * time.Second, status: 200, r: n1, entry: 1},
			step{user: "u4", op: "enter", at: 3 * time.Second, status: 200, r: n2, entry: 1},
			step{user: "u1", op: "complete", at: 4 * time.Second, status: 200, entry: 1, jti: o1.AdmissionID,
				r: reply{State: "COMPLETED", AdmissionID: o1.AdmissionID, CompletedAtMs: ms + 3500, Repeated: true}},
			step{user: "u2", op: "status", at: 4 * time.Second, status: 200, entry: 1, r: waiting(2)},
		))
		for _, k := range []string{vIDReuse, vOverCapacity, vRepeatedNever, vOldCompleted, vLostWaiting} {
			assert.Positive(t, bad.count[k], "%s\n%s", k, bad.summary())
		}
	})

	t.Run("admission ids", func(t *testing.T) {
		for _, c := range []struct {
			jti   string
			epoch string
			ok    bool
		}{
			{"7.1.2.3", "7", true}, {"ab.1.2.3", "ab", true},
			{"1.2.3", "", false}, {"1.2", "", false}, {".1.2.3", "", false}, {"1.x.3", "", false}, {"a.b.1.2.3", "", false},
		} {
			// The checker reads ids with the one codec, flashgate.ParseAdmissionID:
			// every id the issuer mints carries its room's epoch.
			id, ok := flashgate.ParseAdmissionID(c.jti)
			assert.Equal(t, c.ok, ok, c.jti)
			assert.Equal(t, c.epoch, id.Epoch, c.jti)
		}
	})
}
