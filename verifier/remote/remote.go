// Package remote provides a verifier.KeySet backed by a JWK Set (RFC 7517
// §5) fetched over HTTP — the issuer's /.well-known/jwks.json — for order
// services that verify admission tokens but cannot read the issuer's key
// ring file.
//
// It uses the standard library and package verifier only, so a verify-only
// service needs neither jwx nor the private key ring code of package keys.
// Every fetched document is parsed by verifier.ParseJWKS, the same strict
// rules the verifier, the command line and the wasm module apply: only
// Ed25519 public keys (RFC 8037 §2: kty "OKP", crv "Ed25519", 32-byte x)
// meant for EdDSA signatures are used, and a document with a private member
// "d", a duplicate kid, a malformed Ed25519 key or no usable key is refused
// as a whole (the previous good set stays in use).
//
// # Caching
//
// New fetches the set once before returning. A background goroutine (it
// stops when New's ctx ends) looks every Config.CheckEvery (default 1 min)
// for a due refresh. A refresh is due max(max-age, MinRefreshInterval)
// after the last fetch, where max-age comes from the response's
// Cache-Control max-age directive or, failing that, its Expires header
// (RFC 9111 §5.2.2.1, §5.3); without either it is due MinRefreshInterval
// after the last fetch (MinRefreshInterval after a failed one). In
// practice the set is refreshed every max(max-age, MinRefreshInterval),
// rounded up to CheckEvery; the flashgate issuer sends max-age=60.
//
// A kid missing from the cached set forces one immediate refresh (see
// KeySet.PublicKey): concurrent callers share one fetch in flight, and at
// most one forced fetch starts per MinRefreshInterval, so a flood of
// made-up kids cannot hammer the issuer. A failed fetch — transport error,
// status other than 200, a Content-Type that is not JSON, a body larger than
// MaxBodySize, or a document verifier.ParseJWKS refuses — is logged and
// counted (KeySet.Stats) and keeps the last good set.
//
// Lookups of known kids read an in-memory snapshot and never wait for a
// fetch. Intervals are measured with Config.Now, so tests can drive them
// with a fake clock; only the background loop's CheckEvery ticker uses real
// time.
package remote

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashgate/flashgate/verifier"
)

// Defaults of Config.
const (
	// DefaultMinRefreshInterval is Config.MinRefreshInterval's zero value meaning.
	DefaultMinRefreshInterval = 10 * time.Second
	// DefaultCheckEvery is Config.CheckEvery's zero value meaning.
	DefaultCheckEvery = time.Minute
	// MinCheckEvery is the least Config.CheckEvery; smaller values are raised to it.
	MinCheckEvery = time.Second
	// DefaultTimeout is Config.Timeout's zero value meaning, and the Timeout of
	// the http.Client used when Config.HTTPClient is nil.
	DefaultTimeout = 10 * time.Second
)

// minCheckEvery is MinCheckEvery; tests lower it to drive the background
// loop quickly.
var minCheckEvery = MinCheckEvery

// MaxBodySize bounds a fetched JWK Set document, in bytes (1 MiB, the limit
// of verifier.ParseJWKS). A longer body is a failed fetch.
const MaxBodySize = 1 << 20

// Config configures New. A nil *Config and the zero value of every field
// are usable.
type Config struct {
	// HTTPClient performs the fetches; nil means an http.Client with a
	// Timeout of DefaultTimeout (10 s). Each fetch is also bounded by
	// Timeout, whatever the client's own timeout.
	HTTPClient *http.Client
	// Timeout bounds one fetch (connect, headers and body). Zero means
	// DefaultTimeout (10 s).
	Timeout time.Duration
	// MinRefreshInterval is the least time between two fetches forced by
	// unknown kids, and the least interval between two background
	// refreshes. Zero means DefaultMinRefreshInterval (10 s).
	MinRefreshInterval time.Duration
	// CheckEvery is how often the background goroutine looks for a due
	// refresh, by the real clock. Zero means DefaultCheckEvery (1 min);
	// values below MinCheckEvery (1 s) are raised to it.
	CheckEvery time.Duration
	// Now returns the current time, by which MinRefreshInterval and
	// refresh due times are measured; nil means time.Now.
	Now func() time.Time
	// Logger receives fetch failures (Warn) and successes (Debug); nil means
	// slog.Default().
	Logger *slog.Logger
}

// KeySet is a verifier.KeySet backed by a JWK Set fetched over HTTP and
// cached in memory (see the package documentation for the refresh rules).
// Build one with New. All methods are safe for concurrent use.
type KeySet struct {
	url        string
	ctx        context.Context // lifetime: bounds fetches, stops the loop
	client     *http.Client
	timeout    time.Duration
	minRefresh time.Duration
	checkEvery time.Duration
	now        func() time.Time
	log        *slog.Logger

	snap atomic.Pointer[snapshot]

	fetches  atomic.Uint64
	failures atomic.Uint64

	mu           sync.Mutex
	inflight     *call     // the fetch in progress, if any
	forcedOnce   bool      // a forced fetch has started
	lastForced   time.Time // start of the last forced fetch (Now)
	nextRefresh  time.Time // when the background loop refreshes next (Now)
	lastFailedAt time.Time // end of the last failed fetch (Now)
	lastErr      error     // error of the last failed fetch
}

var _ verifier.KeySet = (*KeySet)(nil)

// snapshot is the last good set.
type snapshot struct {
	keys    *verifier.StaticKeys
	fetched time.Time // by Now
}

// call is one fetch in flight, shared by every caller that waits for it.
type call struct {
	done chan struct{}
	err  error // set before done is closed
}

// errRateLimited: an unknown kid would force a fetch, but the last forced
// fetch started less than MinRefreshInterval ago.
var errRateLimited = errors.New("no fetch: last forced refresh too recent")

// New returns a KeySet for the JWK Set at jwksURL, an absolute http or
// https URL. cfg may be nil.
//
// New fetches the set once before returning. If that fails the error is
// logged and New still succeeds: PublicKey retries (at most once per
// MinRefreshInterval) and returns verifier.ErrUnavailable until a set has
// been fetched. New fails only for an invalid URL.
//
// ctx bounds the life of the KeySet: its end stops the background refresh
// goroutine and makes later fetches fail (the last good set stays usable).
// With a ctx that never ends the goroutine runs for the life of the
// process.
func New(ctx context.Context, jwksURL string, cfg *Config) (*KeySet, error) {
	if err := checkURL("JWKS", jwksURL); err != nil {
		return nil, err
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: c.Timeout}
	}
	if c.MinRefreshInterval <= 0 {
		c.MinRefreshInterval = DefaultMinRefreshInterval
	}
	if c.CheckEvery <= 0 {
		c.CheckEvery = DefaultCheckEvery
	}
	if c.CheckEvery < minCheckEvery {
		c.CheckEvery = minCheckEvery
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	s := &KeySet{
		url:        jwksURL,
		ctx:        ctx,
		client:     c.HTTPClient,
		timeout:    c.Timeout,
		minRefresh: c.MinRefreshInterval,
		checkEvery: c.CheckEvery,
		now:        c.Now,
		log:        c.Logger,
	}
	if err := s.wait(ctx, s.start()); err != nil {
		s.log.Warn("remote: JWKS not available yet; will retry on use", "url", jwksURL, "err", err)
	}
	go s.loop()
	return s, nil
}

// PublicKey returns the Ed25519 public key named by kid. It implements
// verifier.KeySet.
//
// A kid found in the cached set is answered from memory. An unknown kid
// forces one refresh and a second look: concurrent callers share a single
// fetch, and at most one forced fetch starts per MinRefreshInterval (by
// Config.Now); within that interval an unknown kid is answered at once.
// Errors:
//   - verifier.ErrUnknownKey (wrapped): kid is empty, or still names no
//     usable key after the refresh (or without one, when rate limited);
//   - verifier.ErrUnavailable (wrapped): no set has ever been fetched, or
//     ctx ended while waiting for the fetch.
func (s *KeySet) PublicKey(ctx context.Context, kid string) (ed25519.PublicKey, error) {
	if k, ok := s.lookup(kid); ok {
		return k, nil
	}
	if kid == "" {
		return nil, fmt.Errorf("%w: empty kid", verifier.ErrUnknownKey)
	}
	err := s.forceRefresh(ctx)
	if k, ok := s.lookup(kid); ok {
		return k, nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		return nil, fmt.Errorf("%w: waiting for %s: %v", verifier.ErrUnavailable, s.url, ctxErr)
	}
	if s.snap.Load() == nil {
		if errors.Is(err, errRateLimited) {
			s.mu.Lock()
			if s.lastErr != nil {
				err = s.lastErr
			}
			s.mu.Unlock()
		}
		return nil, fmt.Errorf("%w: no JWK Set fetched from %s yet: %v", verifier.ErrUnavailable, s.url, err)
	}
	if len(kid) > 64 {
		kid = kid[:64] + "…"
	}
	return nil, fmt.Errorf("%w: %q", verifier.ErrUnknownKey, kid)
}

// Stats describes a KeySet's fetches so far. Times are by Config.Now; a
// zero time means "never".
type Stats struct {
	// Fetches counts the fetches started: the one in New, forced ones and
	// background ones.
	Fetches uint64
	// Failures counts the fetches that did not replace the set: transport
	// errors, bad status or Content-Type, oversized bodies and documents
	// verifier.ParseJWKS refused.
	Failures uint64
	// KeyIDs are the kids of the cached set, sorted; nil before the first
	// good fetch.
	KeyIDs []string
	// Fetched is when the cached set was fetched.
	Fetched time.Time
	// LastError is the error of the last failed fetch, nil if none failed.
	LastError error
	// LastFailure is when the last failed fetch ended.
	LastFailure time.Time
}

// Stats returns a snapshot of the KeySet's counters and cached kids.
func (s *KeySet) Stats() Stats {
	st := Stats{Fetches: s.fetches.Load(), Failures: s.failures.Load()}
	if sn := s.snap.Load(); sn != nil {
		st.KeyIDs = sn.keys.KeyIDs()
		st.Fetched = sn.fetched
	}
	s.mu.Lock()
	st.LastError, st.LastFailure = s.lastErr, s.lastFailedAt
	s.mu.Unlock()
	return st
}

func (s *KeySet) lookup(kid string) (ed25519.PublicKey, bool) {
	sn := s.snap.Load()
	if sn == nil {
		return nil, false
	}
	k, err := sn.keys.PublicKey(context.Background(), kid)
	return k, err == nil
}

// forceRefresh joins the fetch in flight, if any; otherwise it starts one
// unless the last forced fetch started less than MinRefreshInterval ago
// (then it returns errRateLimited at once). It waits for the fetch until
// ctx ends.
func (s *KeySet) forceRefresh(ctx context.Context) error {
	s.mu.Lock()
	c := s.inflight
	if c == nil {
		now := s.now()
		if s.forcedOnce && now.Sub(s.lastForced) < s.minRefresh {
			s.mu.Unlock()
			return errRateLimited
		}
		s.forcedOnce, s.lastForced = true, now
		c = s.startLocked()
	}
	s.mu.Unlock()
	return s.wait(ctx, c)
}

// refreshIfDue fetches the set when the background refresh is due by
// Config.Now, and waits for the fetch. It is one tick of the background
// loop.
func (s *KeySet) refreshIfDue() {
	s.mu.Lock()
	c := s.inflight
	if c == nil {
		if s.now().Before(s.nextRefresh) {
			s.mu.Unlock()
			return
		}
		c = s.startLocked()
	}
	s.mu.Unlock()
	_ = s.wait(s.ctx, c)
}

func (s *KeySet) loop() {
	t := time.NewTicker(s.checkEvery)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.refreshIfDue()
		}
	}
}

// start returns the fetch in flight, starting one if there is none.
func (s *KeySet) start() *call {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight != nil {
		return s.inflight
	}
	return s.startLocked()
}

// startLocked starts a fetch; s.mu must be held and no fetch in flight. The
// fetch runs detached from any caller's ctx (other callers share it),
// bounded by the KeySet's lifetime and Timeout.
func (s *KeySet) startLocked() *call {
	c := &call{done: make(chan struct{})}
	s.inflight = c
	s.fetches.Add(1)
	go func() {
		err := s.fetch()
		s.mu.Lock()
		s.inflight = nil
		if err != nil {
			s.lastErr, s.lastFailedAt = err, s.now()
			s.nextRefresh = s.lastFailedAt.Add(s.minRefresh)
		}
		s.mu.Unlock()
		if err != nil {
			s.failures.Add(1)
			if s.snap.Load() != nil {
				s.log.Warn("remote: JWKS fetch failed; keeping the cached set", "url", s.url, "err", err)
			} else {
				s.log.Warn("remote: JWKS fetch failed; no key set yet", "url", s.url, "err", err)
			}
		}
		c.err = err
		close(c.done)
	}()
	return c
}

func (s *KeySet) wait(ctx context.Context, c *call) error { return waitCall(ctx, c) }

// fetch GETs the set, parses it with verifier.ParseJWKS and on success
// publishes it and schedules the next background refresh.
func (s *KeySet) fetch() error {
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
	body, header, err := get(ctx, s.client, s.url, "application/jwk-set+json, application/json")
	if err != nil {
		return err
	}
	set, err := verifier.ParseJWKS(body)
	if err != nil {
		return fmt.Errorf("GET %s: %w", s.url, err)
	}
	now := s.now()
	s.snap.Store(&snapshot{keys: set, fetched: now})
	interval := max(freshness(header, now), s.minRefresh)
	s.mu.Lock()
	s.nextRefresh = now.Add(interval)
	s.mu.Unlock()
	s.log.Debug("remote: JWKS fetched", "url", s.url, "keys", len(set.KeyIDs()), "next_refresh_in", interval)
	return nil
}

// checkURL refuses raw unless it is an absolute http or https URL; what
// names it in the error.
func checkURL(what, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("remote: %s URL: %w", what, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("remote: %s URL %q: want an absolute http or https URL", what, raw)
	}
	return nil
}

// get GETs url and returns its body and headers: an error for a transport
// failure, a status other than 200, a Content-Type that is not JSON, or a
// body larger than MaxBodySize.
func get(ctx context.Context, client *http.Client, url, accept string) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", accept)
	res, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4<<10))
		return nil, nil, fmt.Errorf("GET %s: status %s", url, res.Status)
	}
	if ct := res.Header.Get("Content-Type"); !jsonType(ct) {
		return nil, nil, fmt.Errorf("GET %s: Content-Type %q is not JSON", url, ct)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, MaxBodySize+1))
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: read body: %w", url, err)
	}
	if len(body) > MaxBodySize {
		return nil, nil, fmt.Errorf("GET %s: body larger than %d bytes", url, MaxBodySize)
	}
	return body, res.Header, nil
}

// jsonType accepts a missing Content-Type and any JSON media type:
// application/json, application/jwk-set+json (RFC 7517 §8.5) and other
// "+json" types. Parameters (charset) are ignored.
func jsonType(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	_, sub, ok := strings.Cut(mt, "/")
	return ok && (sub == "json" || strings.HasSuffix(sub, "+json"))
}

// freshness returns the response's freshness lifetime: Cache-Control
// max-age (RFC 9111 §5.2.2.1), or else Expires minus Date (§5.3, §4.2.1;
// minus now when Date is missing or invalid). It is zero when neither is
// usable, when Cache-Control says no-cache or no-store, and for a malformed
// max-age.
func freshness(h http.Header, now time.Time) time.Duration {
	maxAge, haveMaxAge := time.Duration(0), false
	for _, line := range h.Values("Cache-Control") {
		for _, d := range strings.Split(line, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(d), "=")
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "no-cache", "no-store":
				return 0
			case "max-age":
				n, err := strconv.ParseInt(strings.Trim(strings.TrimSpace(val), `"`), 10, 64)
				if err != nil || n < 0 {
					return 0
				}
				const maxSeconds = int64(1<<63-1) / int64(time.Second)
				maxAge, haveMaxAge = time.Duration(min(n, maxSeconds))*time.Second, true
			}
		}
	}
	if haveMaxAge {
		return maxAge
	}
	exp, err := http.ParseTime(h.Get("Expires"))
	if err != nil {
		return 0
	}
	if date, err := http.ParseTime(h.Get("Date")); err == nil {
		now = date
	}
	return max(exp.Sub(now), 0)
}
