package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/flashgate/flashgate/verifier"
)

// runSmoke is `flashgate smoke`: one buyer's walk through a running issuer,
// from outside, as `helm test` runs it (deploy/helm/flashgate
// templates/tests): the JWKS is fetched and parsed, a test room is created
// (admin API), a buyer enters, is admitted, exchanges its waiting token for
// an admission token that verifies against that JWKS, completes, and the
// room is deleted.
func runSmoke(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("smoke", flag.ContinueOnError)
	fset.SetOutput(stderr)
	base := fset.String("url", "http://127.0.0.1:8080", "the issuer's base URL")
	room := fset.String("room", "flashgate-smoke", "the test room's name prefix (a random suffix is added): created, entered and deleted")
	iss := fset.String("issuer", "flashgate", "expected iss of the admission token (FLASHGATE_ISSUER)")
	aud := fset.String("audience", "orders", "expected aud (FLASHGATE_AUDIENCE)")
	timeout := fset.Duration("timeout", time.Minute, "the whole walk's budget")
	fset.Usage = func() {
		fmt.Fprintf(fset.Output(), "Usage: flashgate smoke [-url URL] [-room R] [-issuer I] [-audience A] [-timeout 1m]\n\n"+
			"Walks one buyer through a running issuer: JWKS, test room (admin API, token from\n"+
			"FLASHGATE_ADMIN_TOKEN), enter, status until admitted, exchange, the admission token\n"+
			"verified against the JWKS, complete, room deleted. Exit status 0 when every step passed.\n\n")
		fset.PrintDefaults()
	}
	if code, ok := parseFlags(fset, args, stdout, stderr); !ok {
		return code
	}
	if code, ok := noArgs(fset, stderr); !ok {
		return code
	}
	admin := os.Getenv("FLASHGATE_ADMIN_TOKEN")
	if admin == "" {
		fmt.Fprintln(stderr, "flashgate smoke: FLASHGATE_ADMIN_TOKEN is not set (the test room is made with the admin API)")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := smoke(ctx, strings.TrimRight(*base, "/"), *room, *iss, *aud, admin, stdout); err != nil {
		fmt.Fprintf(stderr, "flashgate smoke: %v\n", err)
		return exitFailure
	}
	fmt.Fprintln(stdout, "smoke: ok")
	return exitOK
}

func smoke(ctx context.Context, base, room, iss, aud, admin string, out io.Writer) error {
	call := func(method, path, user, bearer string, body any, want int, v any) error {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
		if err != nil {
			return err
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if user != "" {
			req.Header.Set("X-User-ID", user)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		if res.StatusCode != want && (want != 0 || res.StatusCode/100 != 2) { // 0: any 2xx
			return fmt.Errorf("%s %s: %d, want %d: %s", method, path, res.StatusCode, want, b)
		}
		if v != nil {
			if err := json.Unmarshal(b, v); err != nil {
				return fmt.Errorf("%s %s: %w", method, path, err)
			}
		}
		return nil
	}
	room += "-" + randomHex() // a deleted room's name is not reused at once
	var doc json.RawMessage
	if err := call(http.MethodGet, "/.well-known/jwks.json", "", "", nil, http.StatusOK, &doc); err != nil {
		return err
	}
	set, err := verifier.ParseJWKS(doc)
	if err != nil || len(set.KeyIDs()) == 0 {
		return fmt.Errorf("the JWKS: %v (%d keys)", err, len(set.KeyIDs()))
	}
	fmt.Fprintf(out, "smoke: JWKS has %d keys\n", len(set.KeyIDs()))
	path := "/admin/rooms/" + url.PathEscape(room)
	if err := call(http.MethodPut, path, "", admin, map[string]any{"capacity": 10, "rate_per_minute": 600}, 0, nil); err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		ctx = dctx
		if err := call(http.MethodDelete, path, "", admin, nil, 0, nil); err != nil {
			fmt.Fprintf(out, "smoke: deleting the room: %v\n", err)
		}
	}()
	user := "smoke-" + randomHex()
	v1 := "/v1/rooms/" + url.PathEscape(room)
	var e struct {
		State        string `json:"state"`
		WaitingToken string `json:"waiting_token"`
		PollAfterMS  int    `json:"poll_after_ms"`
	}
	if err := call(http.MethodPost, v1+"/enter", user, "", nil, http.StatusOK, &e); err != nil {
		return err
	}
	fmt.Fprintf(out, "smoke: entered %s as %s: %s\n", room, user, e.State)
	for e.State == "WAITING" {
		select {
		case <-ctx.Done():
			return errors.New("never admitted")
		case <-time.After(min(max(time.Duration(e.PollAfterMS)*time.Millisecond, 100*time.Millisecond), time.Second)):
		}
		if err := call(http.MethodGet, v1+"/status", user, e.WaitingToken, nil, http.StatusOK, &e); err != nil {
			return err
		}
	}
	if e.State != "ACTIVE" {
		return fmt.Errorf("state %s, want ACTIVE", e.State)
	}
	var x struct {
		AdmissionToken string `json:"admission_token"`
	}
	if err := call(http.MethodPost, v1+"/exchange", user, e.WaitingToken, nil, http.StatusOK, &x); err != nil {
		return err
	}
	v, err := verifier.New(set, verifier.Config{Issuer: iss, Audience: aud, Product: room})
	if err != nil {
		return err
	}
	if _, err := v.Verify(ctx, x.AdmissionToken, verifier.Expect{Product: room, User: user}); err != nil {
		return fmt.Errorf("the admission token does not verify against the JWKS: %w", err)
	}
	fmt.Fprintln(out, "smoke: admission token verified against the JWKS")
	if err := call(http.MethodPost, "/v1/complete?room="+url.QueryEscape(room), "", x.AdmissionToken, nil, http.StatusOK, nil); err != nil {
		return err
	}
	fmt.Fprintln(out, "smoke: completed")
	return nil
}

func randomHex() string {
	var id [6]byte
	_, _ = rand.Read(id[:])
	return hex.EncodeToString(id[:])
}
