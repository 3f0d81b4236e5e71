package keys

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"

	"github.com/flashgate/flashgate/verifier"
)

// Defaults of RemoteOptions.
const (
	DefaultMinRefreshInterval = 10 * time.Second
	DefaultRemoteCheckEvery   = time.Minute
	DefaultRemoteTimeout      = 10 * time.Second
)

// maxJWKSBody bounds the size of a fetched JWK Set document.
const maxJWKSBody = 1 << 20

// RemoteOptions configure NewRemote. The zero value is usable.
type RemoteOptions struct {
	// HTTPClient performs the fetches; nil means a new http.Client. Each
	// fetch is bounded by Timeout whatever the client's own timeout.
	HTTPClient *http.Client
	// MinRefreshInterval is the shortest time between two fetches forced by
	// an unknown kid, and the lower bound of the background refresh
	// interval. Zero means 10 s.
	MinRefreshInterval time.Duration
	// CheckEvery is how often the background loop looks for a set whose
	// refresh is due (jwk.WithRefreshWindow); at least 1 s. Zero means 1 min.
	CheckEvery time.Duration
	// Timeout bounds one fetch (connect, headers and body). Zero means 10 s.
	Timeout time.Duration
	// Logger receives fetch failures; nil means slog.Default().
	Logger *slog.Logger
}

// Remote is a verifier.KeySet backed by a JWK Set fetched over HTTP (the
// issuer's /.well-known/jwks.json) and cached with jwx's jwk.Cache.
//
// Caching: the set is fetched once by NewRemote and then refreshed in the
// background. jwk.Cache honours the response's Cache-Control max-age or
// Expires header, never refreshing sooner than MinRefreshInterval; without
// those headers it refreshes every MinRefreshInterval. A due refresh runs
// at the next tick of the background loop (every CheckEvery), so in practice
// the set is refreshed every max(max-age, MinRefreshInterval), rounded up to
// CheckEvery. A kid missing from the cached set forces one immediate
// refresh (see PublicKey). A failed fetch keeps the last good set.
//
// Lookups of known kids read an in-memory snapshot and never wait for a
// fetch. All methods are safe for concurrent use.
type Remote struct {
	url        string
	ctx        context.Context
	cache      *jwk.Cache
	minRefresh time.Duration
	log        *slog.Logger

	snap atomic.Pointer[remoteSnapshot]

	mu         sync.Mutex
	inflight   *fetchCall // the forced fetch in progress, if any
	lastForced time.Time  // start of the last forced fetch
}

var _ verifier.KeySet = (*Remote)(nil)

// remoteSnapshot holds the usable keys of the last fetched set.
type remoteSnapshot struct {
	keys    map[string]ed25519.PublicKey
	fetched time.Time
}

type fetchCall struct {
	done chan struct{}
	err  error
}

// errRateLimited is returned by forceRefresh when the last forced fetch is
// more recent than MinRefreshInterval.
var errRateLimited = errors.New("no fetch: last forced refresh too recent")

// NewRemote returns a key set that fetches the JWK Set at rawURL (http or
// https). It fetches once before returning; if that fails the error is
// logged, NewRemote still succeeds and PublicKey retries (at most once per
// MinRefreshInterval) and returns verifier.ErrUnavailable until a set has
// been fetched. NewRemote fails only for an invalid URL.
//
// ctx bounds the life of the Remote: cancelling it stops the background
// refresh, and later fetches fail.
func NewRemote(ctx context.Context, rawURL string, opts RemoteOptions) (*Remote, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("keys: remote JWKS URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("keys: remote JWKS URL %q: want an absolute http or https URL", rawURL)
	}
	if opts.MinRefreshInterval <= 0 {
		opts.MinRefreshInterval = DefaultMinRefreshInterval
	}
	if opts.CheckEvery <= 0 {
		opts.CheckEvery = DefaultRemoteCheckEvery
	}
	if opts.CheckEvery < time.Second {
		opts.CheckEvery = time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultRemoteTimeout
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	r := &Remote{url: rawURL, ctx: ctx, minRefresh: opts.MinRefreshInterval, log: opts.Logger}
	r.cache = jwk.NewCache(ctx,
		jwk.WithRefreshWindow(opts.CheckEvery),
		jwk.WithErrSink(errSinkFunc(func(err error) {
			r.log.Warn("keys: background JWKS refresh failed; keeping the cached set", "url", rawURL, "err", err)
		})),
	)
	err = r.cache.Register(rawURL,
		jwk.WithMinRefreshInterval(opts.MinRefreshInterval),
		jwk.WithHTTPClient(&fetchClient{ctx: ctx, client: opts.HTTPClient, timeout: opts.Timeout}),
		jwk.WithPostFetcher(jwk.PostFetchFunc(r.postFetch)),
	)
	if err != nil {
		return nil, fmt.Errorf("keys: remote JWKS: %w", err)
	}
	if _, err := r.cache.Refresh(ctx, rawURL); err != nil {
		r.log.Warn("keys: JWKS not available yet; will retry on use", "url", rawURL, "err", err)
	}
	return r, nil
}

// PublicKey returns the Ed25519 public key named by kid. It implements
// verifier.KeySet.
//
// A kid found in the cached set is answered from memory. An unknown kid
// forces one refresh and a second look: concurrent callers share a single
// fetch, and at most one forced fetch starts per MinRefreshInterval, so a
// flood of made-up kids cannot hammer the issuer. Errors:
//   - verifier.ErrUnknownKey (wrapped): kid is still unknown, or names a key
//     that is not an Ed25519 (OKP) public signing key;
//   - verifier.ErrUnavailable (wrapped): no set has ever been fetched, or ctx
//     ended while waiting for the fetch.
func (r *Remote) PublicKey(ctx context.Context, kid string) (ed25519.PublicKey, error) {
	if k, ok := r.lookup(kid); ok {
		return k, nil
	}
	if kid == "" {
		return nil, fmt.Errorf("%w: empty kid", verifier.ErrUnknownKey)
	}
	err := r.forceRefresh(ctx)
	if k, ok := r.lookup(kid); ok {
		return k, nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		return nil, fmt.Errorf("%w: waiting for %s: %v", verifier.ErrUnavailable, r.url, ctxErr)
	}
	if r.snap.Load() == nil {
		return nil, fmt.Errorf("%w: no JWK Set fetched from %s yet: %v", verifier.ErrUnavailable, r.url, err)
	}
	return nil, fmt.Errorf("%w: %q", verifier.ErrUnknownKey, kid)
}

func (r *Remote) lookup(kid string) (ed25519.PublicKey, bool) {
	s := r.snap.Load()
	if s == nil {
		return nil, false
	}
	k, ok := s.keys[kid]
	return k, ok
}

// forceRefresh fetches the set now unless a forced fetch is already in
// flight (then it waits for that one) or started less than MinRefreshInterval
// ago (then it returns errRateLimited at once).
func (r *Remote) forceRefresh(ctx context.Context) error {
	r.mu.Lock()
	c := r.inflight
	if c == nil {
		now := time.Now()
		if !r.lastForced.IsZero() && now.Sub(r.lastForced) < r.minRefresh {
			r.mu.Unlock()
			return errRateLimited
		}
		r.lastForced = now
		c = &fetchCall{done: make(chan struct{})}
		r.inflight = c
		// Detached from the caller's ctx: other callers share this fetch.
		go func() {
			_, err := r.cache.Refresh(r.ctx, r.url)
			c.err = err
			r.mu.Lock()
			r.inflight = nil
			r.mu.Unlock()
			close(c.done)
		}()
	}
	r.mu.Unlock()
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// postFetch runs after every successful fetch and parse (forced or
// background) and publishes the usable keys as the new snapshot.
func (r *Remote) postFetch(_ string, set jwk.Set) (jwk.Set, error) {
	keys := make(map[string]ed25519.PublicKey, set.Len())
	bad := make(map[string]bool)
	for i := range set.Len() {
		k, _ := set.Key(i)
		kid := k.KeyID()
		if kid == "" {
			continue
		}
		pub, ok := usableKey(k)
		if !ok || bad[kid] || keys[kid] != nil {
			// not an Ed25519 signing key, or an ambiguous duplicate kid
			bad[kid] = true
			delete(keys, kid)
			continue
		}
		keys[kid] = pub
	}
	r.snap.Store(&remoteSnapshot{keys: keys, fetched: time.Now()})
	r.log.Debug("keys: JWKS fetched", "url", r.url, "keys", len(keys))
	return set, nil
}

// usableKey returns the key as an Ed25519 public key if it is an OKP
// Ed25519 public key meant for signatures with EdDSA (use absent or "sig",
// alg absent or "EdDSA", key_ops absent or containing "verify"), the rules
// of verifier.ParseJWKS.
func usableKey(k jwk.Key) (ed25519.PublicKey, bool) {
	okp, ok := k.(jwk.OKPPublicKey)
	if !ok || okp.Crv() != jwa.Ed25519 || len(okp.X()) != ed25519.PublicKeySize {
		return nil, false
	}
	if use := okp.KeyUsage(); use != "" && use != string(jwk.ForSignature) {
		return nil, false
	}
	if alg := okp.Algorithm(); alg != nil && alg.String() != "" && alg.String() != verifier.Alg {
		return nil, false
	}
	if ops := okp.KeyOps(); ops != nil && !slices.Contains(ops, jwk.KeyOpVerify) {
		return nil, false
	}
	return ed25519.PublicKey(bytes.Clone(okp.X())), true
}

// fetchClient adapts an *http.Client to jwk.HTTPClient: it bounds each
// fetch by a timeout and by the Remote's lifetime, reads at most
// maxJWKSBody bytes and always closes the response body.
type fetchClient struct {
	ctx     context.Context
	client  *http.Client
	timeout time.Duration
}

func (c *fetchClient) Get(u string) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	res, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxJWKSBody+1))
	if err != nil {
		return nil, fmt.Errorf("read JWKS body: %w", err)
	}
	if len(body) > maxJWKSBody {
		return nil, fmt.Errorf("JWKS body larger than %d bytes", maxJWKSBody)
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	return res, nil
}

// errSinkFunc adapts a function to jwk.ErrSink.
type errSinkFunc func(error)

func (f errSinkFunc) Error(err error) { f(err) }
