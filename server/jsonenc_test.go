package server

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
)

// sameAsMarshal fails t unless appendJSON's bytes (appended after a prefix,
// which must be kept) equal json.Marshal(v)'s.
func sameAsMarshal(t *testing.T, v interface{ appendJSON([]byte) []byte }) {
	t.Helper()
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	got := v.appendJSON([]byte("prefix"))
	if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[len("prefix"):], want) {
		t.Fatalf("appendJSON differs from encoding/json:\n got %q\nwant %q", got, want)
	}
}

// awkward strings: everything encoding/json escapes or replaces.
var awkward = []string{
	"", "plain", `quote " and \ backslash`, "<script>&</script>", "ctl \x00\x01\x08\x0c\n\r\t\x1f\x7f",
	"é ü 日本 🎟", "line\u2028sep\u2029para", "bad \xff\xfe utf8 \xc3", "truncated \xe2\x82", "\xed\xa0\x80 surrogate",
	"\ufffd real replacement", "'single' /slash/", strings.Repeat("x", 600),
}

func ptr(v int64) *int64 { return &v }

func TestEntryJSONMatchesEncodingJSON(t *testing.T) {
	cases := []Entry{
		{},
		{Room: "r", State: "WAITING", WaitingToken: "t", Arrival: 3, Position: ptr(0), Ahead: ptr(0),
			TotalWaiting: ptr(1), EstimatedWaitMs: ptr(-1), PollAfterMs: ptr(2000), Lane: "public", RoomState: "paused"},
		{Room: "r", State: "WAITING", PreQueue: true, PositionEstimated: true, TotalWaiting: ptr(math.MaxInt64),
			EstimatedWaitMs: ptr(math.MinInt64), PollAfterMs: ptr(0), OpensAtMs: 1700000000000},
		{Room: "r", State: "ADMITTED", AdmissionID: "a", AdmissionNumber: 7, AdmittedAtMs: 1, ExpiresAtMs: 2},
		{State: "EXPIRED", EndedAtMs: -5, Reason: "not_claimed"},
		{State: "REVOKED", BannedUntilMs: 9},
	}
	for _, s := range awkward {
		cases = append(cases, Entry{Room: s, State: s, WaitingToken: s, AdmissionID: s, Reason: s, Lane: s, RoomState: s})
	}
	for _, c := range cases {
		sameAsMarshal(t, &c)
	}
	for _, s := range awkward {
		sameAsMarshal(t, &ExchangeResponse{AdmissionToken: s, AdmissionID: s, AdmissionNumber: -1, ExpiresAt: math.MaxInt64})
		sameAsMarshal(t, &ExchangeResponse{})
		sameAsMarshal(t, &CompleteResponse{State: s, AdmissionID: s, CompletedAtMs: 1, Repeated: true})
		sameAsMarshal(t, &CompleteResponse{})
	}
}

// TestEncodersCoverEveryMember sets every member of each encoded struct to
// a non-zero value by reflection: a member added to the struct but not to
// its encoder makes the outputs differ.
func TestEncodersCoverEveryMember(t *testing.T) {
	for _, v := range []interface{ appendJSON([]byte) []byte }{&Entry{}, &ExchangeResponse{}, &CompleteResponse{}} {
		rv := reflect.ValueOf(v).Elem()
		for i := range rv.NumField() {
			f := rv.Field(i)
			switch f.Kind() {
			case reflect.String:
				f.SetString("s" + rv.Type().Field(i).Name)
			case reflect.Int64:
				f.SetInt(int64(i + 1))
			case reflect.Bool:
				f.SetBool(true)
			case reflect.Pointer:
				f.Set(reflect.ValueOf(ptr(int64(-i))))
			default:
				t.Fatalf("%T.%s: kind %s has no case here (nor, probably, in the encoder)", v, rv.Type().Field(i).Name, f.Kind())
			}
		}
		sameAsMarshal(t, v)
		var members map[string]any
		if err := json.Unmarshal(v.appendJSON(nil), &members); err != nil || len(members) != rv.NumField() {
			t.Fatalf("%T: %d members, want %d (%v)", v, len(members), rv.NumField(), err)
		}
	}
}

// TestEntryWithMatchesEntryJSON: renderEntry's stack form equals entryJSON's.
func TestEntryWithMatchesEntryJSON(t *testing.T) {
	for _, e := range []*issuer.Entry{
		{Room: "r", State: flashgate.StateWaiting, Position: 4, Ahead: 3, TotalWaiting: 9, EstimatedWait: -1, PollAfter: 1500 * time.Millisecond},
		{Room: "r", State: flashgate.StateWaiting, PreQueue: true, EstimatedWait: 2 * time.Second, OpensAt: time.UnixMilli(5)},
		{Room: "r", State: flashgate.StateActive, AdmissionID: "a", ExpiresAt: time.UnixMilli(8)},
	} {
		var ms [2]int64
		got, want := entryWith(e, &ms), entryJSON(e)
		gb, wb := got.appendJSON(nil), want.appendJSON(nil)
		mb, _ := json.Marshal(want)
		if !bytes.Equal(gb, wb) || !bytes.Equal(gb, mb) {
			t.Fatalf("entryWith %s, entryJSON %s, json.Marshal %s", gb, wb, mb)
		}
	}
}

// randString mixes the bytes encoding/json treats specially.
func randString(r *rand.Rand) string {
	pieces := []string{"a", "Z", "0", " ", `"`, `\`, "<", ">", "&", "\x00", "\x1f", "\n", "\t", "\x7f", "é",
		"日", "🎟", "\u2028", "\u2029", "\xff", "\xc3", "\xe2\x82", "\xed\xa0\x80", "\ufffd", "/"}
	var b strings.Builder
	for range r.IntN(12) {
		if r.IntN(4) == 0 {
			b.WriteByte(byte(r.IntN(256)))
		} else {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
	}
	return b.String()
}

// FuzzEntryJSON compares the encoders with encoding/json on entries built
// from the fuzzer's strings and a seeded generator (the seed corpus runs
// with every `go test`; `go test -fuzz FuzzEntryJSON ./server/` explores).
func FuzzEntryJSON(f *testing.F) {
	for i, s := range awkward {
		f.Add(s, uint64(i))
	}
	f.Fuzz(func(t *testing.T, s string, seed uint64) {
		r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		str := func() string {
			switch r.IntN(3) {
			case 0:
				return s
			case 1:
				return randString(r)
			}
			return ""
		}
		num := func() int64 {
			switch r.IntN(4) {
			case 0:
				return 0
			case 1:
				return int64(r.Uint64())
			}
			return r.Int64N(1e13) - 1e6
		}
		opt := func() *int64 {
			if r.IntN(3) == 0 {
				return nil
			}
			return ptr(num())
		}
		for range 8 {
			e := Entry{Room: str(), State: str(), WaitingToken: str(), Arrival: num(), Position: opt(),
				PositionEstimated: r.IntN(2) == 0, PreQueue: r.IntN(2) == 0, Ahead: opt(), TotalWaiting: opt(),
				EstimatedWaitMs: opt(), PollAfterMs: opt(), OpensAtMs: num(), AdmissionID: str(), AdmissionNumber: num(),
				AdmittedAtMs: num(), ExpiresAtMs: num(), EndedAtMs: num(), BannedUntilMs: num(), Reason: str(),
				Lane: str(), RoomState: str()}
			sameAsMarshal(t, &e)
			sameAsMarshal(t, &ExchangeResponse{AdmissionToken: str(), AdmissionID: str(), AdmissionNumber: num(),
				ExpiresAtMs: num(), IssuedAtMs: num(), ExpiresAt: num(), IssuedAt: num()})
			sameAsMarshal(t, &CompleteResponse{State: str(), AdmissionID: str(), CompletedAtMs: num(), Repeated: r.IntN(2) == 0})
		}
	})
}
