package journal

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// KindBatch is the kind of a stream entry that carries the entry events of
// one script call (docs/operations.md#durability): fields kind, epoch and
// events, the events one per line ("\n" between them), each the
// comma-separated fields kind,seq,user,lane,at,admission,reason,eta ("" when
// not known). Neither separator occurs in a field (user ids are
// issuer.ValidID's [A-Za-z0-9-_.~@+=]; the rest are numbers, words and
// admission ids). It is never an Event's Kind: StreamEvents expands it.
const KindBatch Kind = "batch"

// batchFields is the number of comma-separated fields of an event of a
// batch entry; batchField maps their names to their places.
const batchFields = 8

var batchField = map[string]int{"kind": 0, "seq": 1, "user": 2, "lane": 3, "at": 4, "admission": 5, "reason": 6, "eta": 7}

// StreamEvents maps one entry of room's journal stream onto its events, in
// order: a batch entry (KindBatch) onto one Event per line, any other (an
// entry event of the layout written before batches, `kind epoch seq user
// lane at admission reason eta`, or a room event, `kind epoch at actor
// action detail`) onto one Event. id is the stream entry id, every event's
// ID (the key of a room event; informational for entry events, whose key is
// room, epoch and arrival); field returns the value of a field of the
// entry, "" for a missing one (unknown fields are ignored). An event that
// cannot be read is left out, and why is in bad, one sentence each; the
// events returned still need Validate.
func StreamEvents(room, id string, field func(name string) string) (events []Event, bad []string) {
	if Kind(field("kind")) != KindBatch {
		e, why := parseFields(room, id, field("epoch"), field)
		if why != "" {
			return nil, []string{why}
		}
		return []Event{e}, nil
	}
	epoch, lines := field("epoch"), field("events")
	if lines == "" {
		return nil, []string{"a batch without events"}
	}
	var f [batchFields]string
	for n, line := range strings.Split(lines, "\n") {
		i := 0
		for ; i < batchFields-1; i++ {
			var ok bool
			if f[i], line, ok = strings.Cut(line, ","); !ok {
				break
			}
		}
		if i < batchFields-1 || strings.Contains(line, ",") {
			bad = append(bad, fmt.Sprintf("batch event %d has not %d comma-separated fields", n+1, batchFields))
			continue
		}
		f[batchFields-1] = line
		if !Kind(f[0]).entry() {
			bad = append(bad, fmt.Sprintf("batch event %d: %q is not an entry event", n+1, f[0]))
			continue
		}
		e, why := parseFields(room, id, epoch, func(name string) string {
			if i, ok := batchField[name]; ok {
				return f[i]
			}
			return ""
		})
		if why != "" {
			bad = append(bad, fmt.Sprintf("batch event %d: %s", n+1, why))
			continue
		}
		events = append(events, e)
	}
	return events, bad
}

// parseFields maps the fields of one event onto an Event (the contract's
// field names; epoch given: a batch's is the entry's). It returns why it
// cannot, or "".
func parseFields(room, id, epoch string, str func(string) string) (Event, string) {
	e := Event{ID: id, Room: room, Kind: Kind(str("kind")), Epoch: epoch, User: str("user"),
		Lane: str("lane"), AdmissionID: str("admission"), Reason: str("reason"), Actor: str("actor"),
		Action: str("action"), Detail: str("detail")}
	var eta int64 = -1
	for _, f := range []struct {
		name string
		to   *int64
	}{{"seq", &e.Arrival}, {"at", &e.At}, {"eta", &eta}} {
		v := str(f.name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return e, fmt.Sprintf("%s %q is not a decimal integer", f.name, v)
		}
		*f.to = n
	}
	if eta >= 0 && e.Kind == KindEntered {
		d := time.Duration(eta) * time.Millisecond
		e.EstimatedWait = &d
	}
	return e, ""
}
