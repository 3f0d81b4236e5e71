package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/journal"
)

// journalDSNEnv names the journal's PostgreSQL URL in the environment (also
// read by flashgate serve for its admin journal routes).
const journalDSNEnv = "FLASHGATE_JOURNAL_DSN"

// journalFlags are the flags show and report share.
type journalFlags struct {
	fs       *flag.FlagSet
	dsn      string
	room     string
	jsonOut  bool
	name     string // "show" or "report", for messages
	synopsis string
	// check, when set, returns what is wrong with the command's own flags
	// ("" = nothing), before the journal is opened.
	check func() string
}

func newJournalFlags(name, synopsis, about string) *journalFlags {
	j := &journalFlags{fs: flag.NewFlagSet("journal "+name, flag.ContinueOnError), name: name, synopsis: synopsis}
	j.fs.StringVar(&j.dsn, "dsn", "", "PostgreSQL URL of the journal (default $"+journalDSNEnv+")")
	j.fs.StringVar(&j.room, "room", "", "the room (required)")
	j.fs.BoolVar(&j.jsonOut, "json", false, "print JSON instead of text")
	j.fs.Usage = func() {
		fmt.Fprintf(j.fs.Output(), "Usage: flashgate journal %s %s\n\n%s\n\nFlags:\n", name, synopsis, about)
		j.fs.PrintDefaults()
	}
	return j
}

// parse parses args and opens the journal; ok false means return code.
func (j *journalFlags) parse(ctx context.Context, args []string, stdout, stderr io.Writer) (st *journal.Store, code int, ok bool) {
	if code, ok := parseFlags(j.fs, args, stdout, stderr); !ok {
		return nil, code, false
	}
	fail := func(format string, a ...any) (*journal.Store, int, bool) {
		fmt.Fprintf(stderr, "flashgate journal %s: %s\n", j.name, fmt.Sprintf(format, a...))
		return nil, exitUsage, false
	}
	if j.fs.NArg() > 0 {
		return fail("unexpected argument %q (see -h)", j.fs.Arg(0))
	}
	if j.room == "" {
		return fail("--room is required (see -h)")
	}
	if j.check != nil {
		if why := j.check(); why != "" {
			return fail("%s", why)
		}
	}
	if j.dsn == "" {
		j.dsn = os.Getenv(journalDSNEnv)
	}
	if j.dsn == "" {
		return fail("no journal: set %s to its PostgreSQL URL or pass --dsn", journalDSNEnv)
	}
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := journal.Open(octx, j.dsn)
	if err != nil {
		fmt.Fprintf(stderr, "flashgate journal %s: %s: %v\n", j.name, journalDSNEnv, err)
		return nil, exitFailure, false
	}
	return st, 0, true
}

// runJournalShow is `flashgate journal show --room R --user U [--json] [--all]`:
// what the journal knows of a buyer's newest entry in a room (--all: every
// entry, newest first). Exit 1 when the user has no journaled entry there.
func runJournalShow(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	j := newJournalFlags("show", "--room R --user U [--all] [--json] [--dsn URL]",
		"Prints when the buyer entered the room, was admitted (and how long they waited), with which\n"+
			"admission id (the jti, the order's key), when they exchanged it, and how and why the entry\n"+
			"ended. Times are RFC 3339 in UTC with milliseconds, by the room's clock; \"-\": not journaled.")
	var user string
	var all bool
	j.fs.StringVar(&user, "user", "", "the buyer's user id (required)")
	j.fs.BoolVar(&all, "all", false, "every entry of the user in the room, newest first (default: the newest)")
	j.check = func() string {
		if user == "" {
			return "--user is required (see -h)"
		}
		return ""
	}
	st, code, ok := j.parse(ctx, args, stdout, stderr)
	if !ok {
		return code
	}
	defer st.Close()
	es, err := st.Entries(ctx, j.room, user)
	if err != nil {
		fmt.Fprintf(stderr, "flashgate journal show: %v\n", err)
		return exitFailure
	}
	if len(es) == 0 {
		fmt.Fprintf(stderr, "flashgate journal show: the journal has no entry of user %q in room %q\n", user, j.room)
		return exitFailure
	}
	if !all {
		es = es[:1]
	}
	if j.jsonOut {
		doc := struct {
			Room    string              `json:"room"`
			User    string              `json:"user"`
			Entries []journal.EntryJSON `json:"entries"`
		}{j.room, user, make([]journal.EntryJSON, len(es))}
		for i, e := range es {
			doc.Entries[i] = e.JSON()
		}
		return writeJSON(stdout, stderr, doc)
	}
	for i, e := range es {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		writeEntry(stdout, e)
	}
	return exitOK
}

// writeEntry prints one entry as text (runJournalShow).
func writeEntry(w io.Writer, e journal.Entry) {
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format(journal.TimeLayout)
	}
	lane := e.Lane
	if lane == "" {
		lane = "-"
	}
	fmt.Fprintf(w, "room %s  user %s  epoch %s  arrival %d  lane %s\n", e.Room, e.User, e.Epoch, e.Arrival, lane)
	tw := table(w)
	line := func(what, when, note string) {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", what, when, note)
	}
	line("entered", ts(e.EnteredAt), "")
	note := ""
	if !e.EnteredAt.IsZero() && !e.AdmittedAt.IsZero() {
		note = "waited " + humanDuration(e.AdmittedAt.Sub(e.EnteredAt))
	}
	line("admitted", ts(e.AdmittedAt), note)
	adm := e.AdmissionID
	if adm == "" {
		adm = "-"
	}
	line("admission", adm, "")
	note = ""
	if !e.AdmittedAt.IsZero() && !e.ExchangedAt.IsZero() {
		note = humanDuration(e.ExchangedAt.Sub(e.AdmittedAt)) + " after admission"
	}
	line("exchanged", ts(e.ExchangedAt), note)
	switch {
	case e.End == "":
		line("ended", "-", "still "+map[bool]string{true: "admitted", false: "waiting"}[e.AdmissionID != "" || !e.AdmittedAt.IsZero()])
	default:
		note = string(e.End)
		if e.EndReason != "" {
			note += " (" + e.EndReason + ")"
		}
		if !e.AdmittedAt.IsZero() {
			note += ", " + humanDuration(e.EndedAt.Sub(e.AdmittedAt)) + " after admission"
		}
		line("ended", ts(e.EndedAt), note)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "  completed: %s\n", map[bool]string{true: "yes", false: "no"}[e.Completed()])
}

// runJournalReport is `flashgate journal report --room R [--epoch E] [--json]`:
// the room's aggregates (journal.Report) as a table, or its JSON.
func runJournalReport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	j := newJournalFlags("report", "--room R [--epoch E] [--json] [--dsn URL]",
		"Prints the room's journaled entries by outcome (entered = completed + abandoned + live +\n"+
			"closed + left waiting + waiting; abandoned: admitted, ended without an order) and the wait\n"+
			"(admitted − entered) p50/p95 overall and per minute of admission (UTC).")
	var epoch string
	j.fs.StringVar(&epoch, "epoch", "", "only this epoch of the room (default: every epoch)")
	j.check = func() string {
		if epoch != "" && !flashgate.ValidEpoch(epoch) {
			return fmt.Sprintf("--epoch %q is not a room epoch", epoch)
		}
		return ""
	}
	st, code, ok := j.parse(ctx, args, stdout, stderr)
	if !ok {
		return code
	}
	defer st.Close()
	r, err := st.Report(ctx, j.room, epoch)
	if err != nil {
		fmt.Fprintf(stderr, "flashgate journal report: %v\n", err)
		return exitFailure
	}
	if j.jsonOut {
		return writeJSON(stdout, stderr, r)
	}
	writeReport(stdout, r)
	return exitOK
}

// writeReport prints a report as text (runJournalReport).
func writeReport(w io.Writer, r journal.Report) {
	ep := "every epoch"
	if r.Epoch != "" {
		ep = "epoch " + r.Epoch
	}
	fmt.Fprintf(w, "room %s (%s)\n\n", r.Room, ep)
	width := len(strconv.FormatInt(r.Entered, 10))
	row := func(n int64, what string) { fmt.Fprintf(w, "%*d  %s\n", width, n, what) }
	row(r.Entered, "entered")
	row(r.Admitted, "admitted")
	row(r.Completed, "  completed")
	row(r.Abandoned, "  abandoned (admitted, ended without an order)")
	row(r.Live, "  live")
	row(r.Entered-r.Admitted, "not admitted")
	row(r.Closed, "  closed (the room closed while waiting)")
	row(r.LeftWaiting, "  left waiting (left the line, revoked or banned)")
	row(r.Waiting, "  waiting")
	fmt.Fprintln(w)
	if r.Wait.Admitted == 0 {
		fmt.Fprintln(w, "wait: no admission with both its entered and admitted times journaled")
		return
	}
	fmt.Fprintf(w, "wait (admitted - entered): p50 %s  p95 %s  over %d admissions\n",
		msDuration(r.Wait.P50Ms), msDuration(r.Wait.P95Ms), r.Wait.Admitted)
	if e := r.Estimate; e.Admitted > 0 {
		fmt.Fprintf(w, "estimate shown on entering - wait: |error| p50 %s  p90 %s  bias %s  over %d admissions\n",
			msDuration(e.AbsP50Ms), msDuration(e.AbsP90Ms), msDuration(e.BiasMeanMs), e.Admitted)
	}
	fmt.Fprintln(w)
	tw := table(w)
	fmt.Fprintln(tw, "minute (UTC)\tadmitted\twait p50\twait p95")
	for _, m := range r.WaitByMinute {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", m.Minute.UTC().Format("2006-01-02 15:04"), m.Admitted,
			msDuration(m.P50Ms), msDuration(m.P95Ms))
	}
	_ = tw.Flush()
}

// trimWriter drops the spaces tabwriter pads an empty last cell with.
type trimWriter struct {
	w   io.Writer
	buf bytes.Buffer
}

// table is a tabwriter (two spaces between columns) over w whose lines
// end without trailing spaces; Flush it.
func table(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(&trimWriter{w: w}, 0, 0, 2, ' ', 0)
}

func (t *trimWriter) Write(p []byte) (int, error) {
	t.buf.Write(p)
	for {
		i := bytes.IndexByte(t.buf.Bytes(), '\n')
		if i < 0 {
			return len(p), nil
		}
		line := bytes.TrimRight(t.buf.Next(i+1), " \n")
		if _, err := t.w.Write(append(line, '\n')); err != nil {
			return 0, err
		}
	}
}

// humanDuration rounds d for people: to the millisecond under a second,
// else to a tenth of a second ("41.2s", "1m28.8s").
func humanDuration(d time.Duration) string {
	if d < time.Second && d > -time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// msDuration is humanDuration of a (fractional) number of milliseconds.
func msDuration(ms float64) string {
	return humanDuration(time.Duration(ms * float64(time.Millisecond)))
}

func writeJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(stderr, "flashgate journal: %v\n", err)
		return exitFailure
	}
	return exitOK
}
