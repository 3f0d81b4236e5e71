package store

import (
	"fmt"
	"strconv"

	"github.com/flashgate/flashgate"
)

// reader reads a script's positional reply field by field: the one reader
// every decoder of this package uses. A reply too short, or a field of
// another type than asked for, is an error naming the script and the field
// (flashgate.CodeInternal), never a panic or a silent zero; after the first
// error every read returns the zero value and the error stays the first.
// An absent field (Lua false: a Redis nil) reads as 0 or "". A nested list
// (list) reads with a reader of its own that reports into the same error.
type reader struct {
	script string
	path   string // the list's field name within the reply ("" at the top)
	r      []any
	i      int
	err    *error
}

func newReader(script string, r []any) *reader {
	var err error
	return &reader{script: script, r: r, err: &err}
}

// Err is the first error of the reply's reads (nil: well formed so far).
func (c *reader) Err() error { return *c.err }

func (c *reader) fail(field, what string) {
	if *c.err == nil {
		name := field
		if c.path != "" {
			name = c.path + "." + field
		}
		*c.err = flashgate.Errorf(flashgate.CodeInternal, "%s script: malformed reply: field %s (element %d): %s: %v",
			c.script, name, c.i+1, what, c.r)
	}
}

func (c *reader) next(field string) (any, bool) {
	if *c.err != nil {
		return nil, false
	}
	if c.i >= len(c.r) {
		c.fail(field, "missing")
		return nil, false
	}
	c.i++
	return c.r[c.i-1], true
}

// int reads an integer (a Lua number, or a string of one).
func (c *reader) int(field string) int64 {
	v, ok := c.next(field)
	if !ok {
		return 0
	}
	switch x := v.(type) {
	case int64:
		return x
	case nil:
		return 0
	case string:
		if n, err := strconv.ParseInt(x, 10, 64); err == nil || x == "" {
			return n
		}
	}
	c.i--
	c.fail(field, fmt.Sprintf("want an integer, got %T", v))
	return 0
}

// flag reads an integer as a boolean: 1 is true, 0 (or absent) false,
// anything else an error.
func (c *reader) flag(field string) bool {
	n := c.int(field)
	if n != 0 && n != 1 {
		c.i--
		c.fail(field, fmt.Sprintf("want 0 or 1, got %d", n))
	}
	return n == 1
}

// str reads a string.
func (c *reader) str(field string) string {
	v, ok := c.next(field)
	if !ok {
		return ""
	}
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	}
	c.i--
	c.fail(field, fmt.Sprintf("want a string, got %T", v))
	return ""
}

// list reads a nested list: a reader of its elements (an empty one when
// the field is absent or on error).
func (c *reader) list(field string) *reader {
	sub := &reader{script: c.script, path: field, err: c.err}
	if c.path != "" {
		sub.path = c.path + "." + field
	}
	v, ok := c.next(field)
	if !ok {
		return sub
	}
	switch x := v.(type) {
	case []any:
		sub.r = x
		return sub
	case nil:
		return sub
	}
	c.i--
	c.fail(field, fmt.Sprintf("want a list, got %T", v))
	return sub
}

// skip passes over one field of any type.
func (c *reader) skip(field string) { c.next(field) }

// more reports whether fields are left (a variable-length tail).
func (c *reader) more() bool { return *c.err == nil && c.i < len(c.r) }

// len is the number of fields of the list (read or not).
func (c *reader) len() int { return len(c.r) }

// expect reads a string field that must be want (a reply's tag).
func (c *reader) expect(field, want string) {
	if s := c.str(field); *c.err == nil && s != want {
		c.i--
		c.fail(field, fmt.Sprintf("want %q, got %q", want, s))
	}
}

// bad records a reply of a shape the decoder refuses (what: why).
func (c *reader) bad(field, what string) {
	if c.i > 0 {
		c.i--
	}
	c.fail(field, what)
}

// Figures are a room's measured figures at one moment as the prelude's
// eta_figures (and eta_expiry) gather them: {now_ms, capacity, live,
// admits, ends, window_ms, session_ms, batch, tick_ms, opens_ms,
// configured state} and, when present, a position's expiry (ms). OK is
// false for the empty list a script answers when there is no estimate
// (nobody waits in the call, or the room is closed).
type Figures struct {
	OK                                bool
	NowMs, Capacity, Live             int64
	Admits, Ends, WindowMs            int64
	SessionMs, Batch, TickMs, OpensMs int64
	Configured                        string
	ExpiryMs                          int64
}

// figures reads the figures list of field name.
func (c *reader) figures(name string) Figures {
	l := c.list(name)
	if l.len() == 0 {
		return Figures{}
	}
	f := Figures{OK: true, NowMs: l.int("now_ms"), Capacity: l.int("capacity"), Live: l.int("live"),
		Admits: l.int("admits"), Ends: l.int("ends"), WindowMs: l.int("window_ms"), SessionMs: l.int("session_ms"),
		Batch: l.int("batch"), TickMs: l.int("tick_ms"), OpensMs: l.int("opens_ms"), Configured: l.str("configured")}
	if l.more() {
		f.ExpiryMs = l.int("expiry_ms")
	}
	return f
}
