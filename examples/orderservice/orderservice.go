// Package orderservice is a small order service guarded by flashgate
// admission tokens: what a real order pod does, in a few dozen lines.
//
//	POST /orders/{product}   Authorization: Bearer <admission token>
//
// The token is verified offline (verifier.Middleware, keys from the issuer's
// JWKS); only the completion — the one step that must be exact — goes to
// the queue store, through Options.Completer (order.Redis against the
// issuer's Redis, or order.HTTP through the issuer's /v1/complete).
//
// Answers: 201 {order_id, user, product, admission_id}; for a refused
// completion, the status of its code in package problem's table (409
// "completed" for an admission that was already used; 410 expired or
// revoked; 404 not_found; 503 when the queue store cannot answer); 401/403
// with the verifier's reason for a bad token. Errors are RFC 9457
// application/problem+json documents with "code" and "reason" members.
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

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/order"
	"github.com/flashgate/flashgate/problem"
	"github.com/flashgate/flashgate/verifier"
)

// Options configures New.
type Options struct {
	// Verifier checks admission tokens. Required.
	Verifier *verifier.Verifier
	// Completer consumes admissions (order.Redis, order.HTTP). Its errors
	// are domain errors (flashgate.ErrExpired, …); anything else is answered
	// 500. Required.
	Completer order.Completer
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
	// the completion's domain code: completed / expired / revoked / not_found / …).
	Rejections map[string]int64 `json:"rejections"`
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

func (s *Service) order(c order.Completer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := verifier.TokenFromContext(r.Context())
		if !ok { // unreachable behind the middleware
			k, d := problem.TokenDetails("missing", "no verified admission token")
			k.Write(w, d)
			return
		}
		s.verified.Add(1)
		done, err := c.Complete(r.Context(), tok)
		if err == nil && done.Repeated {
			err = flashgate.Errorf(flashgate.CodeCompleted, "admission %s was already used for an order", tok.ID)
		}
		if err != nil {
			code := flashgate.ErrorCode(err)
			if code == flashgate.CodeInternal && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
				code = flashgate.CodeUnavailable
			}
			if code == flashgate.CodeInternal {
				s.log.Error("orderservice: completion failed", "admission_id", tok.ID, "err", err)
			}
			k := problem.Lookup(string(code))
			d := k.New(err.Error())
			d.Reason = string(code)
			k.Write(w, d)
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
