package store

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
)

// A well-formed reply of each script, as the scripts send them, and its
// decoder. Every decoder of the package is here (TestEveryDecoderIsFed
// checks the list against the package's decode functions).
var figures = []any{int64(1000), int64(4), int64(4), int64(2), int64(1), int64(500), int64(300_000), int64(100),
	int64(1000), int64(0), "open"}

type decoderCase struct {
	reply  []any
	decode func([]any) error
	// shorter lists the prefix lengths that are well formed too (a
	// variable-length tail: bans' pages, revoke's optional ban).
	shorter []int
}

func decoderCases() map[string]decoderCase {
	e := func(_ any, err error) error { return err }
	return map[string]decoderCase{
		"active": {reply: []any{"ACTIVE", int64(5)}, decode: func(r []any) error { return e(decodeActive(r)) }},
		"audit":  {reply: []any{int64(1)}, decode: func(r []any) error { return e(decodeAudit(r)) }},
		"ban": {reply: []any{"BANNED", int64(9), int64(1), "ep.1.1.1", int64(5)},
			decode: func(r []any) error { return e(decodeBan(r)) }},
		"bans": {reply: []any{int64(2), "u1", int64(9), "5:spam", "u2", int64(10), "6:"},
			decode: func(r []any) error { return e(decodeBans(r)) }, shorter: []int{1, 4}},
		"complete": {reply: []any{[]any{"COMPLETED", int64(5), int64(0)}, []any{"ERROR", "stale"}},
			decode: func(r []any) error { return e(decodeComplete(r, 2, "r")) }},
		"configure": {reply: []any{"open", int64(0), "", int64(0), "7"},
			decode: func(r []any) error { return e(decodeConfigure(r)) }},
		"drain": {reply: []any{int64(3), int64(4)}, decode: func(r []any) error { return e(decodeDrain(r)) }},
		"enter": {reply: slices.Concat([]any{int64(0), int64(600), "open", "ep0ch", figures},
			[]any{int64(1), int64(7), int64(3), int64(3), int64(1500)},
			[]any{int64(2), int64(8), int64(0), "ep0ch.8.1.1000", int64(2000)},
			[]any{int64(3), int64(99)}),
			decode: func(r []any) error { return e(decodeEnter("enter", r, 3)) }},
		"leave": {reply: []any{"LEFT"}, decode: func(r []any) error { return e(decodeLeave(r)) }},
		"revoke": {reply: []any{"REVOKED", int64(5), int64(1), "j", int64(9)},
			decode: func(r []any) error { return e(decodeRevoke(r)) }, shorter: []int{4}},
		"roombeacon": {reply: []any{"open", int64(4), int64(1), int64(2), int64(9), int64(0), int64(0), int64(0), "closed",
			int64(0), int64(0), "soon", int64(60), int64(1000), []any{int64(2), int64(1), int64(9), int64(4)}},
			decode: func(r []any) error { return e(decodeRoomBeacon(r)) }},
		"snapshot": {reply: []any{int64(3), int64(1), int64(3), "open", int64(60), int64(10), int64(1000), "ep0ch",
			[]any{"bad"}, int64(0), int64(0), int64(0), "closed", int64(0), int64(1), int64(2), int64(2), []any{int64(2)},
			figures, []any{int64(1), int64(5000)}},
			decode: func(r []any) error { return e(decodeSnapshot(r)) }},
		"stats": {reply: []any{"OK", int64(3), int64(2), "open", int64(10), int64(60), int64(300_000), int64(100),
			int64(1000), []any{"admitted", "4", "drawn", "1"}, int64(5000), int64(9), "open", int64(0), int64(0), "ep0ch",
			int64(0), "fifo", int64(-1), int64(0), int64(0), int64(0), "", "", int64(0), "", int64(0), int64(0), "0",
			int64(0), int64(1)},
			decode: func(r []any) error { return e(decodeStats(r)) }},
		"status": {reply: slices.Concat([]any{int64(3), int64(60), "open", figures},
			[]any{"WAITING", int64(1), int64(1), "public", int64(0)},
			[]any{"ACTIVE", int64(2), "e-2", int64(9), int64(0), ""}),
			decode: func(r []any) error { return e(decodeStatus(r, 2)) }},
		"tick": {reply: []any{int64(1), int64(0), int64(1), int64(0), int64(1000), int64(0), "open", int64(10), int64(60),
			int64(300_000), int64(100), int64(0), int64(0), int64(0), int64(0), int64(0), "fifo", int64(0), int64(0),
			int64(0), "0", "", int64(0), int64(0), int64(0)},
			decode: func(r []any) error { return e(decodeTick(r)) }},
		"unban": {reply: []any{"UNBANNED", int64(1)}, decode: func(r []any) error { return e(decodeUnban(r)) }},
		"int": {reply: []any{int64(1)}, decode: func(r []any) error {
			if len(r) == 0 {
				return e(decodeInt("int", "n", nil)) // a nil reply reads 0: the cut case has no field to lose
			}
			return e(decodeInt("int", "n", r[0]))
		}, shorter: []int{0}},
	}
}

// checkMalformed asserts err is the reader's refusal: a flashgate internal
// error naming the script and a field.
func checkMalformed(t *testing.T, err error, script, what string) {
	t.Helper()
	if !assert.Error(t, err, "%s: %s", script, what) {
		return
	}
	assert.ErrorIs(t, err, flashgate.ErrInternal, "%s: %s", script, what)
	assert.Contains(t, err.Error(), script+" script: malformed reply: field ", "%s: %s", script, what)
}

// TestDecodersRefuseMalformedReplies feeds every decoder its script's
// reply cut short at every length and with every field (nested ones
// included) of another type: each answer is an error naming the script and
// the field, never a panic or a zero read as a value.
func TestDecodersRefuseMalformedReplies(t *testing.T) {
	for script, c := range decoderCases() {
		t.Run(script, func(t *testing.T) {
			require.NoError(t, c.decode(c.reply), "the well-formed reply")
			for n := range len(c.reply) {
				err := func() (err error) {
					defer func() {
						if p := recover(); p != nil {
							err = fmt.Errorf("panic: %v", p)
						}
					}()
					return c.decode(c.reply[:n])
				}()
				if slices.Contains(c.shorter, n) {
					assert.NoError(t, err, "%d fields: a shorter reply of the same shape", n)
					continue
				}
				checkMalformed(t, err, script, fmt.Sprintf("cut at %d fields", n))
			}
			for _, path := range fieldPaths(c.reply, nil) {
				r := withField(c.reply, path, mistyped(fieldAt(c.reply, path)))
				checkMalformed(t, c.decode(r), script, fmt.Sprintf("field %v mistyped", path))
			}
		})
	}
}

// mistyped is a value of another kind than v: a list for a scalar, a
// string for a list.
func mistyped(v any) any {
	if _, ok := v.([]any); ok {
		return "x"
	}
	return []any{int64(1)}
}

// fieldPaths lists the paths of r's scalar fields and of its lists.
func fieldPaths(r []any, prefix []int) [][]int {
	var out [][]int
	for i, v := range r {
		p := append(slices.Clone(prefix), i)
		out = append(out, p)
		if l, ok := v.([]any); ok {
			out = append(out, fieldPaths(l, p)...)
		}
	}
	return out
}

func fieldAt(r []any, path []int) any {
	v := r[path[0]]
	if len(path) == 1 {
		return v
	}
	return fieldAt(v.([]any), path[1:])
}

// withField returns a deep copy of r with the field at path set to v.
func withField(r []any, path []int, v any) []any {
	out := slices.Clone(r)
	if len(path) == 1 {
		out[path[0]] = v
		return out
	}
	out[path[0]] = withField(r[path[0]].([]any), path[1:], v)
	return out
}

// TestEveryDecoderIsFed: the cases above cover every decode function of
// the package (a decoder added without a case fails here).
func TestEveryDecoderIsFed(t *testing.T) {
	cases := decoderCases()
	for _, name := range decoderNames(t) {
		_, ok := cases[strings.ToLower(strings.TrimPrefix(name, "decode"))]
		assert.True(t, ok, "%s has no case in decoderCases", name)
	}
}

// TestDecodersReadValues: the fields land where they belong (a spot check
// per decoder shape; the golden, issuer's TestScriptsGolden, checks them all
// against the scripts).
func TestDecodersReadValues(t *testing.T) {
	c := decoderCases()
	en, err := decodeEnter("enter", c["enter"].reply, 3)
	require.NoError(t, err)
	assert.Equal(t, Figures{OK: true, NowMs: 1000, Capacity: 4, Live: 4, Admits: 2, Ends: 1, WindowMs: 500,
		SessionMs: 300_000, Batch: 100, TickMs: 1000, Configured: "open"}, en.ETA)
	assert.Equal(t, []EnterUser{{Kind: EnterWaiting, Seq: 7, Pos: 3, Total: 3, ExpiryMs: 1500},
		{Kind: EnterActive, Seq: 8, JTI: "ep0ch.8.1.1000", ExpiryMs: 2000}, {Kind: EnterBanned, BannedUntilMs: 99}}, en.Users)
	for name, r := range map[string][]any{
		"bad epoch":       slices.Concat([]any{int64(0), int64(600), "open", "EP_0", figures}, []any{int64(3), int64(9)}),
		"no figures":      slices.Concat([]any{int64(0), int64(600), "open", "ep0ch", []any{}}, []any{int64(1), int64(7), int64(3), int64(3), int64(0)}),
		"unknown kind":    slices.Concat([]any{int64(0), int64(600), "open", "ep0ch", figures}, []any{int64(5), int64(9)}),
		"ban without end": slices.Concat([]any{int64(0), int64(600), "open", "ep0ch", figures}, []any{int64(3), int64(0)}),
	} {
		_, err := decodeEnter("enter", r, 1)
		checkMalformed(t, err, "enter", name)
	}
	_, err = decodeEnter("enter", c["enter"].reply, 4)
	checkMalformed(t, err, "enter", "one user short")
	_, err = decodeStatus(c["status"].reply, 1)
	checkMalformed(t, err, "status", "one token extra")

	out, err := decodeComplete(c["complete"].reply, 2, "r")
	require.NoError(t, err)
	assert.Equal(t, int64(5), out[0].AtMs)
	assert.ErrorIs(t, out[1].Err, flashgate.ErrNotFound)
	_, err = decodeComplete(c["complete"].reply, 3, "r")
	checkMalformed(t, err, "complete", "count")

	st, err := decodeStats(c["stats"].reply)
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"admitted": 4, "drawn": 1}, st.Counters)
	assert.Equal(t, int64(1), st.Priority)
	assert.Equal(t, int64(-1), st.Cutoff)

	tk, err := decodeTick(c["tick"].reply)
	require.NoError(t, err)
	assert.Equal(t, TickConfig{State: "open", Capacity: 10, Rate: 60, SessionMs: 300_000, Batch: 100, PreQueue: "fifo"}, tk.Config)

	b, err := decodeBans(c["bans"].reply)
	require.NoError(t, err)
	assert.Equal(t, Bans{Total: 2, Bans: []BanEntry{{User: "u1", UntilMs: 9, BannedMs: 5, Dated: true, Reason: "spam"},
		{User: "u2", UntilMs: 10, BannedMs: 6, Dated: true}}}, b)

	rb, err := decodeRoomBeacon(c["roombeacon"].reply)
	require.NoError(t, err)
	assert.Equal(t, []BeaconBucket{{Through: 2, Waiting: 1}, {Through: 9, Waiting: 4}}, rb.Buckets)
	assert.Equal(t, "soon", rb.PageMessage)

	sn, err := decodeSnapshot(c["snapshot"].reply)
	require.NoError(t, err)
	assert.Equal(t, []string{"bad"}, sn.Banned)
	assert.Equal(t, []RankedExpiry{{J: 1, AtMs: 5000}}, sn.Sample)

	_, err = decodeActive([]any{"MAYBE"})
	checkMalformed(t, err, "active", "unknown verdict")
	var fe *flashgate.Error
	require.True(t, errors.As(err, &fe))
}
