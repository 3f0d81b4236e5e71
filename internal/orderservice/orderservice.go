// Package orderservice is a small order service guarded by flashgate
// admission tokens: what a real order pod does, in a few dozen lines.
//
//	POST /orders/{product}   Authorization: Bearer <admission token>
//
// The token is verified offline (verifier.Middleware, keys from the issuer's
// JWKS); only the completion — the one step that must be exact — goes to
// the queue store, through Options.Completer (issuer.CompleteToken against
// Redis, or the issuer's HTTP /v1/complete; see HTTPCompleter).
//
// Answers: 201 {order_id, user, product, admission_id}; 409 "completed" for
// an admission that was already used; 410 for an expired, revoked or
// unknown admission; 401/403 with the verifier's reason for a bad token;
// 503 when the queue store cannot answer. Errors are RFC 9457
// application/problem+json documents with a "reason" member.
package orderservice

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/verifier"
)

// Completer consumes a verified admission: repeated is true when it had
// already been completed (the order must not be placed twice). Errors are
// issuer domain errors (issuer.ErrExpired, issuer.ErrRevoked,
// issuer.ErrNotFound, issuer.ErrOwnerMismatch, issuer.ErrUnavailable, …);
// anything else is answered 500.
type Completer func(ctx context.Context, t *verifier.Token) (repeated bool, err error)

// Options configures New.
type Options struct {
	// Verifier checks admission tokens. Required.
	Verifier *verifier.Verifier
	// Completer consumes admissions. Required.
	Completer Completer
	// UserHeader, when non-empty and present on a request, names the header
	// carrying the caller's user id; the token's sub must then equal it.
	UserHeader string
	// Logger receives unexpected completion errors; nil means slog.Default().
	Logger *slog.Logger
}

// Service is the order service. It is an http.Handler.
type Service struct {
	h   http.Handler
	log *slog.Logger

	verified atomic.Int64
	orders   atomic.Int64

	mu         sync.Mutex
	rejections map[string]int64
}

// Stats counts what the service has seen.
type Stats struct {
	// Verified is the number of requests whose admission token verified.
	Verified int64 `json:"tokens_verified"`
	// Orders is the number of orders placed (201).
	Orders int64 `json:"orders"`
	// Rejections counts refused requests by reason (verifier code name, or
	// completed / expired / revoked / not_found / …).
	Rejections map[string]int64 `json:"rejections"`
}

type rawTokenKey struct{}

// RawToken returns the compact admission token of the request being served
// (set before verification), for Completers that forward it.
func RawToken(ctx context.Context) string {
	s, _ := ctx.Value(rawTokenKey{}).(string)
	return s
}

// New returns the order service.
func New(opts Options) *Service {
	if opts.Verifier == nil || opts.Completer == nil {
		panic("orderservice: Options.Verifier and Options.Completer are required")
	}
	s := &Service{log: opts.Logger, rejections: map[string]int64{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	mopts := verifier.MiddlewareOptions{Product: func(r *http.Request) string { return r.PathValue("product") }}
	if opts.UserHeader != "" {
		h := opts.UserHeader
		mopts.User = func(r *http.Request) string { return r.Header.Get(h) }
	}
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{product}", verifier.Middleware(opts.Verifier, mopts)(s.order(opts.Completer)))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	s.h = mux
	return s
}

// ServeHTTP implements http.Handler.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if tok := bearer(r); tok != "" {
		r = r.WithContext(context.WithValue(r.Context(), rawTokenKey{}, tok))
	}
	rec := &recorder{ResponseWriter: w}
	s.h.ServeHTTP(rec, r)
	if rec.status >= 400 && strings.HasPrefix(r.URL.Path, "/orders/") {
		var p struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(rec.body.Bytes(), &p)
		if p.Reason == "" {
			p.Reason = http.StatusText(rec.status)
		}
		s.mu.Lock()
		s.rejections[p.Reason]++
		s.mu.Unlock()
	}
}

// Stats returns a snapshot of the counters.
func (s *Service) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	rej := make(map[string]int64, len(s.rejections))
	for k, v := range s.rejections {
		rej[k] = v
	}
	return Stats{Verified: s.verified.Load(), Orders: s.orders.Load(), Rejections: rej}
}

// Order is the 201 answer.
type Order struct {
	OrderID     string `json:"order_id"`
	User        string `json:"user"`
	Product     string `json:"product"`
	AdmissionID string `json:"admission_id"`
}

func (s *Service) order(complete Completer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := verifier.TokenFromContext(r.Context())
		if !ok { // unreachable behind the middleware
			writeProblem(w, http.StatusUnauthorized, "missing", "Admission token required", "")
			return
		}
		s.verified.Add(1)
		repeated, err := complete(r.Context(), tok)
		if err == nil && repeated {
			err = issuer.ErrCompleted
		}
		if err != nil {
			status, reason := classify(err)
			if status == http.StatusInternalServerError {
				s.log.Error("orderservice: completion failed", "admission_id", tok.ID, "err", err)
			}
			if status == http.StatusServiceUnavailable {
				w.Header().Set("Retry-After", "1")
			}
			writeProblem(w, status, reason, titles[reason], err.Error())
			return
		}
		s.orders.Add(1)
		var b [12]byte
		_, _ = rand.Read(b[:])
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/orders/"+tok.Product+"/ord_"+hex.EncodeToString(b[:]))
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(Order{OrderID: "ord_" + hex.EncodeToString(b[:]),
			User: tok.User, Product: tok.Product, AdmissionID: tok.ID})
	})
}

// classify maps a completion error to a status and a reason.
func classify(err error) (int, string) {
	switch code := issuer.ErrorCode(err); code {
	case issuer.CodeCompleted:
		return http.StatusConflict, string(code)
	case issuer.CodeExpired, issuer.CodeRevoked, issuer.CodeNotFound:
		return http.StatusGone, string(code)
	case issuer.CodeOwnerMismatch:
		return http.StatusForbidden, string(code)
	case issuer.CodeUnknownRoom:
		return http.StatusNotFound, string(code)
	case issuer.CodeInvalidInput:
		return http.StatusBadRequest, string(code)
	case issuer.CodeUnavailable:
		return http.StatusServiceUnavailable, string(code)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return http.StatusServiceUnavailable, string(issuer.CodeUnavailable)
	}
	return http.StatusInternalServerError, string(issuer.CodeInternal)
}

var titles = map[string]string{
	"missing":              "Admission token required",
	"completed":            "Admission already used for an order",
	"expired":              "Admission expired",
	"revoked":              "Admission revoked",
	"not_found":            "Admission no longer exists",
	"token_owner_mismatch": "Admission belongs to another user",
	"unknown_room":         "Unknown product",
	"invalid_input":        "Invalid request",
	"unavailable":          "Queue store unavailable, retry",
	"internal":             "Internal error",
}

// Problem is an RFC 9457 problem document as this service writes it.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Reason string `json:"reason"`
}

func writeProblem(w http.ResponseWriter, status int, reason, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(Problem{
		Type:  "https://flashgate.dev/problems/order-" + strings.ReplaceAll(reason, "_", "-"),
		Title: title, Status: status, Detail: detail, Reason: reason,
	})
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	const scheme = "bearer "
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return ""
	}
	return strings.TrimLeft(h[len(scheme):], " ")
}

// recorder captures the status and (for errors) the start of the body.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.status >= 400 && r.body.Len() < 4096 {
		r.body.Write(b[:min(len(b), 4096-r.body.Len())])
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
