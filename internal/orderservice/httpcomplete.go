package orderservice

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/verifier"
)

// CompleteOverHTTP completes an admission through the issuer's completion
// endpoint (POST <issuerURL>/v1/complete?product=P with the admission token
// as Bearer token): the path for services that have no Redis access. Refusals
// come back as issuer domain errors (issuer.ErrExpired, …), so Completers
// built on it map them like issuer.CompleteToken's.
func CompleteOverHTTP(ctx context.Context, client *http.Client, issuerURL, product, rawToken string) (*issuer.Completion, error) {
	if client == nil {
		client = http.DefaultClient
	}
	u := strings.TrimRight(issuerURL, "/") + "/v1/complete?product=" + url.QueryEscape(product)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return nil, &issuer.Error{Code: issuer.CodeInternal, Message: "build completion request", Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+rawToken)
	req.Header.Set("Accept", "application/json, application/problem+json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, &issuer.Error{Code: issuer.CodeUnavailable, Message: "issuer unreachable", Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, &issuer.Error{Code: issuer.CodeUnavailable, Message: "read completion answer", Err: err}
	}
	if resp.StatusCode/100 == 2 {
		var out struct {
			State         string `json:"state"`
			AdmissionID   string `json:"admission_id"`
			CompletedAtMs int64  `json:"completed_at_ms"`
			Repeated      bool   `json:"repeated"`
		}
		if err := json.Unmarshal(body, &out); err != nil {
			return nil, &issuer.Error{Code: issuer.CodeInternal, Message: "decode completion answer", Err: err}
		}
		return &issuer.Completion{AdmissionID: out.AdmissionID, CompletedAt: time.UnixMilli(out.CompletedAtMs), Repeated: out.Repeated}, nil
	}
	return nil, ProblemError(resp.StatusCode, body)
}

// HTTPCompleter is a Completer over CompleteOverHTTP; it forwards the raw
// token of the request being served (RawToken).
func HTTPCompleter(client *http.Client, issuerURL string) Completer {
	return func(ctx context.Context, t *verifier.Token) (bool, error) {
		c, err := CompleteOverHTTP(ctx, client, issuerURL, t.Product, RawToken(ctx))
		if err != nil {
			return false, err
		}
		return c.Repeated, nil
	}
}

// ProblemError turns an issuer problem+json answer into an issuer domain
// error, by its "reason" / "code" member or the last segment of its "type".
func ProblemError(status int, body []byte) error {
	var p struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Detail string `json:"detail"`
		Reason string `json:"reason"`
		Code   string `json:"code"`
	}
	_ = json.Unmarshal(body, &p)
	msg := p.Detail
	if msg == "" {
		msg = p.Title
	}
	if msg == "" {
		msg = fmt.Sprintf("issuer answered %d", status)
	}
	for _, cand := range []string{p.Code, p.Reason, p.Type[strings.LastIndexAny(p.Type, "/#")+1:]} {
		c := strings.ReplaceAll(strings.ToLower(cand), "-", "_")
		for _, code := range knownCodes {
			if c == string(code) {
				return &issuer.Error{Code: code, Message: msg}
			}
		}
	}
	switch {
	case status == http.StatusGone:
		return &issuer.Error{Code: issuer.CodeExpired, Message: msg}
	case status == http.StatusConflict:
		return &issuer.Error{Code: issuer.CodeCompleted, Message: msg}
	case status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests || status == http.StatusBadGateway || status == http.StatusGatewayTimeout:
		return &issuer.Error{Code: issuer.CodeUnavailable, Message: msg}
	case status == http.StatusNotFound:
		return &issuer.Error{Code: issuer.CodeNotFound, Message: msg}
	}
	return &issuer.Error{Code: issuer.CodeInternal, Message: fmt.Sprintf("issuer answered %d: %s", status, msg)}
}

var knownCodes = []issuer.Code{
	issuer.CodeInvalidInput, issuer.CodeUnknownRoom, issuer.CodeRoomClosed, issuer.CodeBadWaiting,
	issuer.CodeOwnerMismatch, issuer.CodeNotFound, issuer.CodeNotAdmitted, issuer.CodeExpired,
	issuer.CodeRevoked, issuer.CodeCompleted, issuer.CodeUnavailable, issuer.CodeInternal,
}
