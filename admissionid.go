package flashgate

import (
	"strconv"
	"strings"
	"time"
)

// MaxEpochLen bounds a room epoch: base36 microseconds are 10 characters
// until 2059; 13 leaves room.
const MaxEpochLen = 13

// AdmissionID is what an admission id (the admission token's jti) names:
// "<epoch>.<arrival>.<admission>.<admitted_ms>", as the issuer's admit step
// writes it (issuer/lua/prelude_admission_rate.lua admit, which has its own reader seq_of).
type AdmissionID struct {
	Epoch      string    // the room's epoch when admitted (invariant 6, docs/concepts.md#invariants)
	Arrival    int64     // arrival number in the room (FIFO order), ≥ 1
	Number     int64     // admission number in the room (1, 2, …)
	AdmittedAt time.Time // millisecond precision, the room's clock
}

// String is the jti form "<epoch>.<arrival>.<admission>.<admitted_ms>".
func (id AdmissionID) String() string {
	return id.Epoch + "." + strconv.FormatInt(id.Arrival, 10) + "." + strconv.FormatInt(id.Number, 10) +
		"." + strconv.FormatInt(id.AdmittedAt.UnixMilli(), 10)
}

// ParseAdmissionID splits an admission id; ok is false for any other string
// (wrong field count, an epoch that is not 1…13 of [0-9a-z], non-decimal or
// non-positive arrival or admission numbers).
func ParseAdmissionID(jti string) (id AdmissionID, ok bool) {
	parts := strings.Split(jti, ".")
	if len(parts) != 4 || !ValidEpoch(parts[0]) {
		return AdmissionID{}, false
	}
	seq, err1 := strconv.ParseInt(parts[1], 10, 64)
	admno, err2 := strconv.ParseInt(parts[2], 10, 64)
	ms, err3 := strconv.ParseInt(parts[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || seq <= 0 || admno <= 0 {
		return AdmissionID{}, false
	}
	return AdmissionID{Epoch: parts[0], Arrival: seq, Number: admno, AdmittedAt: time.UnixMilli(ms)}, true
}

// ValidEpoch reports whether e has the form of a room epoch: 1…MaxEpochLen
// of [0-9a-z] (Redis TIME in µs, base36).
func ValidEpoch(e string) bool {
	if len(e) == 0 || len(e) > MaxEpochLen {
		return false
	}
	for i := 0; i < len(e); i++ {
		if c := e[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}
