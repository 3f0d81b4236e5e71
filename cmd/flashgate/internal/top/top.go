// Package top is `flashgate top`: a terminal view of every room of a
// running flashgate, read from its admin API (GET /admin/rooms, then GET
// /admin/rooms/{room}/stats for each) once a second.
package top

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Sample is one room's figures from GET /admin/rooms/{room}/stats (the
// fields top shows), or the error reading them.
type Sample struct {
	Room     string `json:"room"`
	State    string `json:"state"`
	Waiting  int64  `json:"waiting"`
	Live     int64  `json:"live"`
	Entered  int64  `json:"entered"`
	Admitted int64  `json:"admitted"`
	Config   struct {
		Capacity int64 `json:"capacity"`
	} `json:"config"`
	// AtMs is the server's time of the figures (Redis TIME), ms.
	AtMs int64 `json:"at_ms"`
	// Err is why the room's stats could not be read ("" when they were).
	Err string `json:"-"`
}

// Client reads the admin API at Base (scheme://host[:port]) with the admin
// bearer Token.
type Client struct {
	Base  string
	Token string
	HTTP  *http.Client // nil: a client with a 5 s timeout
}

// maxRooms bounds the rooms one refresh reads (the server's own listing is
// bounded by the rooms that exist: operators' and FLASHGATE_MAX_AUTO_ROOMS).
const maxRooms = 200

// Fetch reads every room's stats, rooms sorted by name (at most maxRooms,
// 200). A room whose stats fail is returned with Err set; an error is
// returned only when the room list itself cannot be read (the server is
// unreachable, the token is refused: the message then carries the
// problem's detail).
func (c *Client) Fetch(ctx context.Context) ([]Sample, error) {
	var list struct {
		Rooms []string `json:"rooms"`
	}
	if err := c.get(ctx, "/admin/rooms", &list); err != nil {
		return nil, err
	}
	slices.Sort(list.Rooms)
	if len(list.Rooms) > maxRooms {
		list.Rooms = list.Rooms[:maxRooms]
	}
	out := make([]Sample, 0, len(list.Rooms))
	for _, room := range list.Rooms {
		var s Sample
		if err := c.get(ctx, "/admin/rooms/"+url.PathEscape(room)+"/stats", &s); err != nil {
			s = Sample{Room: room, Err: err.Error()}
		}
		out = append(out, s)
	}
	return out, nil
}

func (c *Client) get(ctx context.Context, path string, v any) error {
	return c.Do(ctx, http.MethodGet, path, v)
}

// Do sends an admin API request (method, path; no body) with the admin
// token and decodes a 200 answer into v. Any other status is an error
// naming the problem's code and detail (or the status).
func (c *Client) Do(ctx context.Context, method, path string, v any) error {
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.Base, "/")+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		var p struct{ Code, Detail string }
		_ = json.Unmarshal(body, &p)
		if p.Code != "" {
			return fmt.Errorf("%s: %d %s: %s", path, res.StatusCode, p.Code, p.Detail)
		}
		return fmt.Errorf("%s: HTTP %d", path, res.StatusCode)
	}
	return json.Unmarshal(body, v)
}

// Row is one line of the view.
type Row struct {
	Sample
	// PerMinute is admissions per minute over the last minute of samples
	// (from the oldest sample of the room at most a minute older than this
	// one); negative while there is no earlier sample to compare.
	PerMinute float64
	// ETA is how long the last in line waits at that pace (waiting ÷
	// admissions per second); 0 with nobody waiting; negative when unknown
	// (no rate yet) or unbounded (waiting, and nobody admitted in the last
	// minute: "stalled").
	ETA time.Duration
}

// Tracker turns successive samples into rows: admissions per minute and
// the ETA of the tail, from the server's own timestamps (Sample.AtMs).
type Tracker struct {
	// history holds each room's samples of the last minute, oldest first.
	history map[string][]Sample
}

// Window is the span Tracker computes admissions per minute over.
const Window = time.Minute

// Update adds samples and returns their rows.
func (t *Tracker) Update(samples []Sample) []Row {
	if t.history == nil {
		t.history = map[string][]Sample{}
	}
	rows := make([]Row, 0, len(samples))
	seen := map[string]bool{}
	for _, s := range samples {
		seen[s.Room] = true
		r := Row{Sample: s, PerMinute: -1, ETA: -1}
		if s.Err != "" {
			rows = append(rows, r)
			continue
		}
		h := t.history[s.Room]
		// Drop what is older than the window (and a history from before a
		// counter reset: Redis lost the room).
		for len(h) > 0 && (s.AtMs-h[0].AtMs > Window.Milliseconds() || h[0].Admitted > s.Admitted) {
			h = h[1:]
		}
		if len(h) > 0 && s.AtMs > h[0].AtMs {
			perSec := float64(s.Admitted-h[0].Admitted) / (float64(s.AtMs-h[0].AtMs) / 1000)
			r.PerMinute = perSec * 60
			switch {
			case s.Waiting == 0:
				r.ETA = 0
			case perSec > 0:
				r.ETA = time.Duration(float64(s.Waiting) / perSec * float64(time.Second))
			}
		} else if s.Waiting == 0 {
			r.ETA = 0
		}
		t.history[s.Room] = append(h, s)
		rows = append(rows, r)
	}
	for room := range t.history {
		if !seen[room] {
			delete(t.history, room)
		}
	}
	return rows
}

// Render writes one frame: a header line (base URL, time) and a table of
// rows — ROOM, STATE, WAITING, LIVE/CAP, ADMITTED/MIN, ETA TAIL, ERROR — or
// the error that kept the rooms from being read.
func Render(w io.Writer, base string, at time.Time, rows []Row, fetchErr error) {
	fmt.Fprintf(w, "flashgate top — %s — %s\n\n", base, at.Format("15:04:05"))
	if fetchErr != nil {
		fmt.Fprintf(w, "cannot read the rooms: %v\n", fetchErr)
		return
	}
	if len(rows) == 0 {
		fmt.Fprintln(w, "no rooms")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ROOM\tSTATE\tWAITING\tLIVE/CAP\tADMITTED/MIN\tETA TAIL\tERROR\t")
	for _, r := range rows {
		if r.Err != "" {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t%s\t\n", r.Room, r.Err)
			continue
		}
		rate := "–"
		if r.PerMinute >= 0 {
			rate = fmt.Sprintf("%.0f", r.PerMinute)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d/%d\t%s\t%s\t\t\n", r.Room, r.State, r.Waiting, r.Live, r.Config.Capacity, rate, eta(r))
	}
	_ = tw.Flush()
}

func eta(r Row) string {
	switch {
	case r.ETA == 0:
		return "0s"
	case r.ETA > 0:
		return r.ETA.Round(time.Second).String()
	case r.PerMinute == 0:
		return "stalled"
	default:
		return "–"
	}
}

// clear moves the cursor home and clears the screen (ANSI).
const clear = "\x1b[H\x1b[2J"

// Options configures Run.
type Options struct {
	Client Client
	// Every is the refresh period (zero: 1 s).
	Every time.Duration
	// Frames, when positive, stops after that many frames (tests, -n).
	Frames int
	// Clear clears the screen before each frame (a terminal).
	Clear bool
}

// Run refreshes the view every Options.Every until ctx ends (nil) or
// Frames frames are written. A failed refresh is shown, not returned: the
// view keeps trying. It returns an error only when the admin token is
// missing.
func Run(ctx context.Context, w io.Writer, o Options) error {
	if o.Client.Token == "" {
		return errors.New("the admin token is required (FLASHGATE_ADMIN_TOKEN)")
	}
	if o.Every <= 0 {
		o.Every = time.Second
	}
	var t Tracker
	tick := time.NewTicker(o.Every)
	defer tick.Stop()
	for n := 1; ; n++ {
		samples, err := o.Client.Fetch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var rows []Row
		if err == nil {
			rows = t.Update(samples)
		}
		if o.Clear {
			fmt.Fprint(w, clear)
		}
		Render(w, o.Client.Base, time.Now(), rows, err)
		if o.Frames > 0 && n >= o.Frames {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
