package server

import (
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
)

// The hot answers (Entry on enter, status and events; ExchangeResponse;
// CompleteResponse) are rendered by the append-style encoders below instead
// of fiber's c.JSON (encoding/json through reflection, a fresh buffer per
// answer): each appends the value's JSON to a pooled buffer, byte for byte
// what encoding/json's Marshal produces for the same value — the same
// member order, omitempty rules and string escaping (HTML-escaped <, > and
// & as \u003c, \u003e, \u0026; U+2028 and U+2029 escaped; invalid UTF-8 as
// \ufffd). jsonenc_test.go checks that equality on a table and by fuzzing
// (FuzzEntryJSON). A member added to one of these structs must be added to
// its encoder too: the tests' reflection check (TestEncodersCoverEveryMember)
// fails otherwise.

// jsonBufs holds the scratch buffers of sendJSON (at most maxPooledJSON
// bytes are kept; answers are a few hundred).
var jsonBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

const maxPooledJSON = 4 << 10

// jsonBuf returns a scratch buffer from jsonBufs, empty; sendJSON gives it back.
func jsonBuf() *[]byte { bp := jsonBufs.Get().(*[]byte); *bp = (*bp)[:0]; return bp }

// sendJSON answers with b, the JSON appended to *bp (jsonBuf), as Content-Type
// application/json, as c.JSON does; then returns bp to the pool. The body is
// copied into the response's own (pooled) body buffer. Callers append with
// direct method calls (v.appendJSON), which keeps the value on their stack.
func sendJSON(c *fiber.Ctx, bp *[]byte, b []byte) error {
	c.Response().SetBody(b)
	c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
	if cap(b) <= maxPooledJSON {
		*bp = b
		jsonBufs.Put(bp)
	}
	return nil
}

// jsonObject appends an object's members: each member function appends
// ,"name":value (the comma only after the first member).
type jsonObject struct {
	b     []byte
	first bool
}

func newObject(dst []byte) jsonObject { return jsonObject{b: append(dst, '{'), first: true} }

func (o *jsonObject) name(n string) {
	if !o.first {
		o.b = append(o.b, ',')
	}
	o.first = false
	o.b = append(o.b, '"')
	o.b = append(o.b, n...) // names are plain ASCII literals: no escaping
	o.b = append(o.b, '"', ':')
}

func (o *jsonObject) str(n, v string) { o.name(n); o.b = appendJSONString(o.b, v) }

func (o *jsonObject) int(n string, v int64) { o.name(n); o.b = strconv.AppendInt(o.b, v, 10) }

func (o *jsonObject) bool(n string, v bool) { o.name(n); o.b = strconv.AppendBool(o.b, v) }

// The omitempty forms: nothing for "", 0, false or nil.

func (o *jsonObject) strOmit(n, v string) {
	if v != "" {
		o.str(n, v)
	}
}

func (o *jsonObject) intOmit(n string, v int64) {
	if v != 0 {
		o.int(n, v)
	}
}

func (o *jsonObject) boolOmit(n string, v bool) {
	if v {
		o.bool(n, v)
	}
}

func (o *jsonObject) intPtrOmit(n string, v *int64) {
	if v != nil {
		o.int(n, *v)
	}
}

func (o *jsonObject) end() []byte { return append(o.b, '}') }

// appendJSON appends e's JSON: json.Marshal(e)'s bytes.
func (e *Entry) appendJSON(dst []byte) []byte {
	o := newObject(dst)
	o.strOmit("room", e.Room)
	o.strOmit("state", e.State)
	o.strOmit("waiting_token", e.WaitingToken)
	o.intOmit("arrival", e.Arrival)
	o.intPtrOmit("position", e.Position)
	o.boolOmit("position_estimated", e.PositionEstimated)
	o.boolOmit("pre_queue", e.PreQueue)
	o.intPtrOmit("ahead", e.Ahead)
	o.intPtrOmit("total_waiting", e.TotalWaiting)
	o.intPtrOmit("estimated_wait_ms", e.EstimatedWaitMs)
	o.intPtrOmit("poll_after_ms", e.PollAfterMs)
	o.intOmit("opens_at_ms", e.OpensAtMs)
	o.strOmit("admission_id", e.AdmissionID)
	o.intOmit("admission", e.AdmissionNumber)
	o.intOmit("admitted_at_ms", e.AdmittedAtMs)
	o.intOmit("expires_at_ms", e.ExpiresAtMs)
	o.intOmit("ended_at_ms", e.EndedAtMs)
	o.intOmit("banned_until_ms", e.BannedUntilMs)
	o.strOmit("reason", e.Reason)
	o.strOmit("lane", e.Lane)
	o.strOmit("room_state", e.RoomState)
	o.strOmit("lottery_commitment", e.LotteryCommitment)
	o.strOmit("receipt", e.Receipt)
	return o.end()
}

// appendJSON appends r's JSON: json.Marshal(r)'s bytes.
func (r *ExchangeResponse) appendJSON(dst []byte) []byte {
	o := newObject(dst)
	o.str("admission_token", r.AdmissionToken)
	o.str("admission_id", r.AdmissionID)
	o.int("admission", r.AdmissionNumber)
	o.int("expires_at_ms", r.ExpiresAtMs)
	o.int("issued_at_ms", r.IssuedAtMs)
	o.int("expires_at", r.ExpiresAt)
	o.int("issued_at", r.IssuedAt)
	return o.end()
}

// appendJSON appends r's JSON: json.Marshal(r)'s bytes.
func (r *CompleteResponse) appendJSON(dst []byte) []byte {
	o := newObject(dst)
	o.str("state", r.State)
	o.str("admission_id", r.AdmissionID)
	o.int("completed_at_ms", r.CompletedAtMs)
	o.bool("repeated", r.Repeated)
	return o.end()
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string the way encoding/json does
// (its appendString with HTML escaping, Go 1.22 and later): ", \ and the
// control characters escaped (\b \f \n \r \t, else \u00XX), <, > and & as
// \u003c, \u003e and \u0026, U+2028 and U+2029 as \u2028 and \u2029, and
// each byte of invalid UTF-8 as \ufffd.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
