package order

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/problem"
	"github.com/flashgate/flashgate/verifier"
)

// HTTPConfig configures NewHTTP. The zero value (or nil) is a safe default.
type HTTPConfig struct {
	// Client sends the completion requests; nil means a client with a 5 s
	// timeout. The caller's context bounds each request as well.
	Client *http.Client
}

// maxAnswer bounds the issuer's answer that is read, in bytes.
const maxAnswer = 64 << 10

// HTTP completes admissions through the issuer's completion endpoint:
// POST <issuer>/v1/complete?room=P with the admission token as Bearer
// token. The issuer verifies the token again and consumes the admission.
type HTTP struct {
	endpoint string
	client   *http.Client
}

// NewHTTP returns the order side over the issuer at issuerURL (scheme and
// host, e.g. "https://queue.internal"). Errors: flashgate.ErrInvalidInput
// for a URL that is not absolute http(s).
func NewHTTP(issuerURL string, cfg *HTTPConfig) (*HTTP, error) {
	u, err := url.Parse(issuerURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, flashgate.Errorf(flashgate.CodeInvalidInput, "order: issuer URL %q is not an absolute http(s) URL", issuerURL)
	}
	h := &HTTP{endpoint: strings.TrimRight(issuerURL, "/") + "/v1/complete", client: &http.Client{Timeout: 5 * time.Second}}
	if cfg != nil && cfg.Client != nil {
		h.client = cfg.Client
	}
	return h, nil
}

// Complete sends tok.Raw (the compact token verifier.Verify accepted) for
// room tok.Product (the token's product claim names the room). The issuer's refusals come back as the domain errors
// their problem documents name (ParseProblem): flashgate.ErrExpired,
// ErrRevoked, ErrNotFound, ErrOwnerMismatch, …; a network failure, an
// unreadable answer or a 5xx is flashgate.ErrUnavailable (retry).
func (h *HTTP) Complete(ctx context.Context, tok *verifier.Token) (*flashgate.Completion, error) {
	u := h.endpoint + "?room=" + url.QueryEscape(tok.Product)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return nil, &flashgate.Error{Code: flashgate.CodeInternal, Message: "build completion request", Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+tok.Raw)
	req.Header.Set("Accept", "application/json, "+problem.ContentType)
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, &flashgate.Error{Code: flashgate.CodeUnavailable, Message: "issuer unreachable", Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, &flashgate.Error{Code: flashgate.CodeUnavailable, Message: "read completion answer", Err: err}
	}
	if resp.StatusCode/100 != 2 {
		return nil, ParseProblem(resp.StatusCode, body)
	}
	var out struct {
		AdmissionID   string `json:"admission_id"`
		CompletedAtMs int64  `json:"completed_at_ms"`
		Repeated      bool   `json:"repeated"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, &flashgate.Error{Code: flashgate.CodeInternal, Message: "decode completion answer", Err: err}
	}
	return &flashgate.Completion{AdmissionID: out.AdmissionID, CompletedAt: time.UnixMilli(out.CompletedAtMs),
		Repeated: out.Repeated}, nil
}

// ParseProblem turns an issuer's error answer into a *flashgate.Error, by
// problem.Parse: the document's code, reason or type, else its status. A
// server-level code is read through its reason when that names a domain code
// (invalid_admission_token with reason "expired": the token lapsed between
// this pod's check and the issuer's, flashgate.ErrExpired); the retryable
// ones (not_ready, rate_limited, any 503) are CodeUnavailable; any other is
// CodeInternal with the code in the message.
func ParseProblem(status int, body []byte) error {
	code, msg := problem.Parse(status, body)
	var d problem.Details
	_ = json.Unmarshal(body, &d)
	for _, cand := range []string{code, d.Reason} {
		for _, c := range flashgate.Codes {
			if string(c) == cand {
				return &flashgate.Error{Code: c, Message: msg}
			}
		}
	}
	if k := problem.Lookup(code); k.RetryAfter > 0 || k.Status == http.StatusTooManyRequests {
		return &flashgate.Error{Code: flashgate.CodeUnavailable, Message: msg}
	}
	return &flashgate.Error{Code: flashgate.CodeInternal, Message: fmt.Sprintf("issuer answered %d %s: %s", status, code, msg)}
}
