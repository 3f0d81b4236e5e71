package simulate

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
	fgproblem "github.com/flashgate/flashgate/problem"
	"github.com/flashgate/flashgate/verifier"
)

// orders is the simulation's order service: POST /orders/{product} with an
// admission token, verified offline (verifier.Middleware), completed through
// an order.Completer — what examples/orderservice shows an order pod doing,
// built here on the order package itself, so that the binary links no
// example. Answers: 201 {order_id, user, product, admission_id}; a refused
// completion, its code's status in package problem's table; a bad token,
// the verifier's 401/403. It counts verified tokens, orders and refusals
// by reason (orderStats).
type orders struct {
	h          http.Handler
	log        *slog.Logger
	verified   atomic.Int64
	placed     atomic.Int64
	mu         sync.Mutex
	rejections map[string]int64
}

// orderStats are the order service's counters at the end of a run.
type orderStats struct {
	Verified   int64
	Orders     int64
	Rejections map[string]int64 // by reason (verifier code name, or the completion's domain code)
}

func newOrders(v *verifier.Verifier, c order.Completer, userHeader string, log *slog.Logger) *orders {
	if log == nil {
		log = slog.Default()
	}
	s := &orders{log: log, rejections: map[string]int64{}}
	mopts := verifier.MiddlewareOptions{Product: func(r *http.Request) string { return r.PathValue("product") }}
	if userHeader != "" {
		mopts.User = func(r *http.Request) string { return r.Header.Get(userHeader) }
	}
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{product}", verifier.Middleware(v, mopts)(s.order(c)))
	s.h = mux
	return s
}

// ServeHTTP serves the request and counts a refused order by its reason.
func (s *orders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &problemRecorder{ResponseWriter: w}
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

func (s *orders) stats() orderStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	rej := make(map[string]int64, len(s.rejections))
	for k, v := range s.rejections {
		rej[k] = v
	}
	return orderStats{Verified: s.verified.Load(), Orders: s.placed.Load(), Rejections: rej}
}

func (s *orders) order(c order.Completer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := verifier.TokenFromContext(r.Context())
		if !ok { // unreachable behind the middleware
			k, d := fgproblem.TokenDetails("missing", "no verified admission token")
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
				s.log.Error("simulate: order completion failed", "admission_id", tok.ID, "err", err)
			}
			k := fgproblem.Lookup(string(code))
			d := k.New(err.Error())
			d.Reason = string(code)
			k.Write(w, d)
			return
		}
		s.placed.Add(1)
		var b [12]byte
		_, _ = rand.Read(b[:])
		id := "ord_" + hex.EncodeToString(b[:])
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/orders/"+tok.Product+"/"+id)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]string{"order_id": id, "user": tok.User, "product": tok.Product,
			"admission_id": tok.ID})
	})
}

// problemRecorder captures the status and (for errors) the start of the body.
type problemRecorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *problemRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *problemRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.status >= 400 && r.body.Len() < 4096 {
		r.body.Write(b[:min(len(b), 4096-r.body.Len())])
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *problemRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
