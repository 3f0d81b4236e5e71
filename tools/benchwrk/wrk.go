package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// wrkResult is what one wrk run printed (wrk 4.1's summary).
type wrkResult struct {
	// Requests is the total of completed requests ("N requests in 5.00s").
	Requests int64
	// PerSec is wrk's "Requests/sec": Requests ÷ the run's duration (the
	// whole -d, even when a Lua thread stopped early, see ThreadsOut).
	PerSec float64
	// Non2xx is "Non-2xx or 3xx responses" (0 when the line is absent).
	Non2xx int64
	// SocketErrors is the sum of "Socket errors: connect, read, write, timeout".
	SocketErrors int64
	// ThreadsOut is lua/pairs.lua's "threads out of pairs" (0 without it).
	ThreadsOut int
}

var (
	reTotal   = regexp.MustCompile(`(?m)^\s*(\d+) requests in [0-9.]+\w+`)
	rePerSec  = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	reNon2xx  = regexp.MustCompile(`(?m)^\s*Non-2xx or 3xx responses:\s+(\d+)`)
	reSockets = regexp.MustCompile(`(?m)^\s*Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
	reOut     = regexp.MustCompile(`(?m)^threads out of pairs: (\d+)`)
)

// parseWrk reads wrk's output. Errors: no "requests in" or "Requests/sec"
// line (wrk failed before measuring, e.g. "unable to connect").
func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	m := reTotal.FindStringSubmatch(out)
	p := rePerSec.FindStringSubmatch(out)
	if m == nil || p == nil {
		return r, fmt.Errorf("wrk printed no result: %s", strings.TrimSpace(out))
	}
	r.Requests, _ = strconv.ParseInt(m[1], 10, 64)
	r.PerSec, _ = strconv.ParseFloat(p[1], 64)
	if m := reNon2xx.FindStringSubmatch(out); m != nil {
		r.Non2xx, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := reSockets.FindStringSubmatch(out); m != nil {
		for _, s := range m[1:] {
			n, _ := strconv.ParseInt(s, 10, 64)
			r.SocketErrors += n
		}
	}
	if m := reOut.FindStringSubmatch(out); m != nil {
		r.ThreadsOut, _ = strconv.Atoi(m[1])
	}
	return r, nil
}

// maxFailedShare is the share of non-2xx answers plus socket errors above
// which a run is reported as failed (the brief of issue 13: 0.1 %).
const maxFailedShare = 0.001

// failed reports whether the run's non-2xx answers and socket errors
// exceed maxFailedShare of its requests (or it completed none).
func (r wrkResult) failed() bool {
	if r.Requests == 0 {
		return true
	}
	return float64(r.Non2xx+r.SocketErrors) > maxFailedShare*float64(r.Requests)
}
