package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashgate/flashgate/verifier"
)

// Defaults of DirectivesConfig.
const (
	// DefaultDirectivesMaxAge is how long a directive document without a
	// usable Cache-Control max-age (or Expires) is used: the issuer's
	// default FLASHGATE_DIRECTIVE_MAX_AGE.
	DefaultDirectivesMaxAge = 5 * time.Second
	// DefaultDirectivesTimeout bounds one directive fetch.
	DefaultDirectivesTimeout = 2 * time.Second
	// DefaultDirectivesRetry is the least time between a failed fetch and
	// the next one.
	DefaultDirectivesRetry = time.Second
)

// DirectivesConfig configures NewDirectives. A nil *DirectivesConfig and
// the zero value of every field are usable.
type DirectivesConfig struct {
	// HTTPClient performs the fetches; nil means http.DefaultClient. Each
	// fetch is bounded by Timeout.
	HTTPClient *http.Client
	// Timeout bounds one fetch; zero means DefaultDirectivesTimeout (2 s).
	Timeout time.Duration
	// MaxAge is how long a document is used when its response has no
	// Cache-Control max-age or Expires; zero means DefaultDirectivesMaxAge (5 s).
	MaxAge time.Duration
	// Retry is the least time after a failed fetch before the next; zero
	// means DefaultDirectivesRetry (1 s).
	Retry time.Duration
	// Now is the clock of ages and retries; nil means time.Now.
	Now func() time.Time
	// Logger receives fetch failures (Warn); nil means slog.Default().
	Logger *slog.Logger
}

// Directives is a verifier.Directives backed by the issuer's edge directive
// document (GET /.well-known/flashgate-directives.json:
// {"rooms":{"<room>":{"not_before":<Unix seconds>}}}), fetched over HTTP
// and used for its max-age. Set it as verifier.Config.Directives. All
// methods are safe for concurrent use.
//
// A lookup within the document's max-age is answered from memory. The
// first lookup after it starts a fetch and waits for it (bounded by
// Timeout and the caller's ctx); concurrent callers share one fetch in
// flight. So a stop reaches this verifier at most max-age + one fetch
// after the issuer published it.
//
// A failed fetch (transport error, status other than 200, a Content-Type
// that is not JSON, a body over MaxBodySize, a document that is not the
// shape above) keeps the last good document, used past its max-age, and
// is retried no sooner than Retry later; meanwhile lookups answer from the
// last good document at once, without waiting. Before the first good fetch
// lookups fail with verifier.ErrDirectivesUnavailable, and Verify refuses
// the token (reason directives_unavailable, 503): never fail open.
type Directives struct {
	url     string
	ctx     context.Context
	client  *http.Client
	timeout time.Duration
	maxAge  time.Duration
	retry   time.Duration
	now     func() time.Time
	log     *slog.Logger

	snap     atomic.Pointer[directiveSnapshot]
	fetches  atomic.Uint64
	failures atomic.Uint64

	mu       sync.Mutex
	inflight *call
	failedAt time.Time // end of the last failed fetch; zero after a good one
	lastErr  error
}

var _ verifier.Directives = (*Directives)(nil)

type directiveSnapshot struct {
	notBefore map[string]int64
	expires   time.Time // by Now
}

// directiveDoc is the document's shape.
type directiveDoc struct {
	Rooms map[string]struct {
		NotBefore int64 `json:"not_before"`
	} `json:"rooms"`
}

// NewDirectives returns a Directives for the document at docURL, an
// absolute http or https URL; cfg may be nil. It fetches the document once
// before returning; a failure is logged and retried on use. ctx bounds the
// life of the Directives (its end makes later fetches fail; the last good
// document stays in use). It fails only for an invalid URL.
func NewDirectives(ctx context.Context, docURL string, cfg *DirectivesConfig) (*Directives, error) {
	if err := checkURL("directives", docURL); err != nil {
		return nil, err
	}
	var c DirectivesConfig
	if cfg != nil {
		c = *cfg
	}
	d := &Directives{url: docURL, ctx: ctx, client: c.HTTPClient, timeout: c.Timeout, maxAge: c.MaxAge,
		retry: c.Retry, now: c.Now, log: c.Logger}
	if d.client == nil {
		d.client = http.DefaultClient
	}
	if d.timeout <= 0 {
		d.timeout = DefaultDirectivesTimeout
	}
	if d.maxAge <= 0 {
		d.maxAge = DefaultDirectivesMaxAge
	}
	if d.retry <= 0 {
		d.retry = DefaultDirectivesRetry
	}
	if d.now == nil {
		d.now = time.Now
	}
	if d.log == nil {
		d.log = slog.Default()
	}
	d.mu.Lock()
	c1 := d.startLocked()
	d.mu.Unlock()
	_ = waitCall(ctx, c1)
	return d, nil
}

// NotBefore returns room's not_before in Unix seconds, 0 when the document
// names no stop for room. It implements verifier.Directives. Errors:
// verifier.ErrDirectivesUnavailable (wrapped) when no document has ever
// been fetched.
func (d *Directives) NotBefore(ctx context.Context, room string) (int64, error) {
	sn := d.snap.Load()
	if sn != nil && d.now().Before(sn.expires) {
		return sn.notBefore[room], nil
	}
	d.mu.Lock()
	c := d.inflight
	if c == nil && (d.failedAt.IsZero() || d.now().Sub(d.failedAt) >= d.retry) {
		c = d.startLocked()
	}
	failing := !d.failedAt.IsZero()
	d.mu.Unlock()
	// After a failure, answer from the last good document at once rather
	// than make every request wait for an issuer that is down.
	if c != nil && (sn == nil || !failing) {
		_ = waitCall(ctx, c)
	}
	if sn = d.snap.Load(); sn != nil {
		return sn.notBefore[room], nil
	}
	d.mu.Lock()
	err := d.lastErr
	d.mu.Unlock()
	if err == nil {
		err = ctx.Err()
	}
	return 0, fmt.Errorf("%w: no directive document fetched from %s yet: %v", verifier.ErrDirectivesUnavailable, d.url, err)
}

// DirectivesStats describes a Directives' fetches so far (times by Now; zero: never).
type DirectivesStats struct {
	Fetches, Failures uint64
	// Expires is when the document in use reaches its max-age.
	Expires time.Time
	// LastError is the error of the last fetch if it failed, else nil.
	LastError error
}

// Stats returns the Directives' counters.
func (d *Directives) Stats() DirectivesStats {
	st := DirectivesStats{Fetches: d.fetches.Load(), Failures: d.failures.Load()}
	if sn := d.snap.Load(); sn != nil {
		st.Expires = sn.expires
	}
	d.mu.Lock()
	st.LastError = d.lastErr
	d.mu.Unlock()
	return st
}

// startLocked starts a fetch, detached from any caller's ctx; d.mu must be
// held and no fetch in flight.
func (d *Directives) startLocked() *call {
	c := &call{done: make(chan struct{})}
	d.inflight = c
	d.fetches.Add(1)
	go func() {
		err := d.fetch()
		d.mu.Lock()
		d.inflight = nil
		if err != nil {
			d.failedAt, d.lastErr = d.now(), err
		} else {
			d.failedAt, d.lastErr = time.Time{}, nil
		}
		d.mu.Unlock()
		if err != nil {
			d.failures.Add(1)
			d.log.Warn("remote: directive fetch failed; keeping the last document", "url", d.url, "err", err)
		}
		c.err = err
		close(c.done)
	}()
	return c
}

func (d *Directives) fetch() error {
	ctx, cancel := context.WithTimeout(d.ctx, d.timeout)
	defer cancel()
	body, header, err := get(ctx, d.client, d.url, "application/json")
	if err != nil {
		return err
	}
	var doc directiveDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("GET %s: %w", d.url, err)
	}
	if doc.Rooms == nil {
		return fmt.Errorf("GET %s: no \"rooms\" object", d.url)
	}
	nb := make(map[string]int64, len(doc.Rooms))
	for room, r := range doc.Rooms {
		nb[room] = r.NotBefore
	}
	now := d.now()
	age := freshness(header, now)
	if age <= 0 && header.Get("Cache-Control") == "" && header.Get("Expires") == "" {
		age = d.maxAge
	}
	d.snap.Store(&directiveSnapshot{notBefore: nb, expires: now.Add(age)})
	return nil
}

// waitCall waits for c or ctx.
func waitCall(ctx context.Context, c *call) error {
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}
