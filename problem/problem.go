// Package problem is flashgate's one mapping between error codes and HTTP:
// the RFC 9457 problem details document, the code → status / title /
// WWW-Authenticate / Retry-After table for every code flashgate answers with
// (domain codes, the server's own codes, and the verifier's refusal reasons),
// its inverse for clients reading such a document back, and the RFC 6750
// bearer-token parser.
//
// server, verifier.Middleware and the order side render through it; no other
// package chooses a status for a code. It is standard library only (the
// verify-only order pod links it through verifier.Middleware).
//
// Type URIs: Base + the code with '_' written '-' ("not_admitted" →
// https://flashgate.dev/problems/not-admitted); a refused admission token:
// Base + "token-" + its reason ("expired" → …/token-expired). The document's
// "code" member carries the code as is, with '_'.
package problem

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// Base prefixes every problem type URI.
const Base = "https://flashgate.dev/problems/"

// Details is an RFC 9457 problem details document (application/problem+json)
// with flashgate's extension members.
type Details struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	// Code is the machine-readable code ('_' form); omitted for token refusals
	// rendered by verifier.Middleware, which carry Reason only.
	Code string `json:"code,omitempty"`
	// Reason is the verifier's reason for a refused admission token
	// ("expired", "bad_signature", …, or "missing").
	Reason string `json:"reason,omitempty"`
	// Position is the place in line of a not_admitted exchange.
	Position int64 `json:"position,omitempty"`
	// BannedUntilMs is when the ban of a banned enter ends (ms since 1970).
	BannedUntilMs int64 `json:"banned_until_ms,omitempty"`
	// Challenge is the proof-of-work challenge of a pow_required answer.
	Challenge *PoWChallenge `json:"challenge,omitempty"`
}

// PoWChallenge is an ALTCHA challenge (https://altcha.org, the widget's
// "challengeurl" answer): find the integer n in [0, MaxNumber] with
// hex(SHA-256(Salt + decimal n)) == Challenge; Signature is
// hex(HMAC-SHA256(server key, Challenge)). The solution is the base64 of
// the JSON {algorithm, challenge, number, salt, signature}.
type PoWChallenge struct {
	Algorithm string `json:"algorithm"`
	Challenge string `json:"challenge"`
	MaxNumber int64  `json:"maxnumber"`
	Salt      string `json:"salt"`
	Signature string `json:"signature"`
}

// ContentType is the media type of a Details document (RFC 9457 §3).
const ContentType = "application/problem+json"

// Kind is one row of the table: how a code is answered over HTTP.
type Kind struct {
	Code   string
	Status int
	Title  string
	// Challenge is the WWW-Authenticate value (RFC 6750 §3), or "".
	Challenge string
	// RetryAfter is the Retry-After value in seconds, or 0 for none.
	RetryAfter int
}

// TypeURI is the problem type URI of a code: Base + code with '-' for '_'.
func TypeURI(code string) string { return Base + strings.ReplaceAll(code, "_", "-") }

// New is the document for k with detail.
func (k Kind) New(detail string) *Details {
	return &Details{Type: TypeURI(k.Code), Title: k.Title, Status: k.Status, Detail: detail, Code: k.Code}
}

// Header sets k's WWW-Authenticate and Retry-After headers, and
// Cache-Control: no-store (a problem answer is never cached), on h.
func (k Kind) Header(h http.Header) {
	if k.Challenge != "" {
		h.Set("WWW-Authenticate", k.Challenge)
	}
	if k.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(k.RetryAfter))
	}
	h.Set("Cache-Control", "no-store")
}

// Write writes d as k's answer: headers (Header), Content-Type, status and
// the JSON document.
func (k Kind) Write(w http.ResponseWriter, d *Details) {
	k.Header(w.Header())
	w.Header().Set("Content-Type", ContentType)
	w.WriteHeader(d.Status)
	_ = json.NewEncoder(w).Encode(d)
}

// Bearer returns the token of an RFC 6750 §2.1 "Authorization: Bearer"
// header value (scheme case-insensitive, surrounding spaces trimmed); ok is
// false when h is not a bearer credential or the token is empty.
func Bearer(h string) (token string, ok bool) {
	const scheme = "bearer "
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", false
	}
	token = strings.TrimSpace(h[len(scheme):])
	return token, token != ""
}
