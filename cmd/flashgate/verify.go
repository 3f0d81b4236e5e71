package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/flashgate/flashgate/verifier"
	"github.com/flashgate/flashgate/verifier/remote"
)

// verifyResult is the one JSON line `flashgate verify` prints.
type verifyResult struct {
	Valid   bool   `json:"valid"`
	Reason  string `json:"reason"`
	User    string `json:"user,omitempty"`
	Product string `json:"product,omitempty"`
	JTI     string `json:"jti,omitempty"`
	Exp     int64  `json:"exp,omitempty"`
	Kid     string `json:"kid,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

func runVerify(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("verify", flag.ContinueOnError)
	fset.SetOutput(stderr)
	jwks := fset.String("jwks", "", "JWK Set file with the issuer's public keys (e.g. a saved /.well-known/jwks.json) (required)")
	iss := fset.String("issuer", "", "expected iss (required)")
	aud := fset.String("audience", "", "expected aud (required)")
	product := fset.String("product", "", "expected product (required)")
	user := fset.String("user", "", "expected sub (optional)")
	now := fset.Int64("now", 0, "check at this time, Unix seconds (default: the current time)")
	leeway := fset.Duration("leeway", 0, "clock skew tolerated on exp/iat/nbf (at most 60s)")
	directives := fset.String("directives", "", "the issuer's edge directives: an http(s) URL (e.g. https://queue.example/.well-known/flashgate-directives.json) "+
		"or a saved copy of that document; a token issued before its room's stop is then not valid (room_stopped), "+
		"and one that cannot be checked against them neither (directives_unavailable) (optional)")
	fset.Usage = func() {
		fmt.Fprintf(fset.Output(), "Usage: flashgate verify --jwks FILE --issuer ISS --audience AUD --product P [--user U] "+
			"[--now UNIX_SECONDS] [--leeway 0s] [--directives URL|FILE] [TOKEN | -]\n\n"+
			"Checks an admission token offline and prints one JSON line {\"valid\":…,\"reason\":…}.\n"+
			"TOKEN \"-\" or absent: read it from stdin, where one trailing newline (\\n or \\r\\n) is dropped;\n"+
			"nothing else is trimmed (a token with spaces is malformed, as for the library).\n"+
			"Exit status: 0 valid, 1 invalid, 2 usage error.\n\n")
		fset.PrintDefaults()
	}
	pos, err := parseInterspersed(fset, args, stdout, stderr)
	if err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		return exitUsage
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "flashgate verify: "+format+"\n", a...)
		return exitUsage
	}
	var missing []string
	for name, v := range map[string]string{"--jwks": *jwks, "--issuer": *iss, "--audience": *aud, "--product": *product} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return usageErr("missing required flags: %s (see -h)", strings.Join(sortStrings(missing), ", "))
	}
	if len(pos) > 1 {
		return usageErr("one token at most, got %d arguments", len(pos))
	}
	raw := "-"
	if len(pos) == 1 {
		raw = pos[0]
	}
	if raw == "-" {
		b, err := io.ReadAll(io.LimitReader(stdin, 1<<20))
		if err != nil {
			return usageErr("read the token from stdin: %v", err)
		}
		// A piped or typed token ends with one newline: strip that one only.
		// Every other byte is part of the token, for the library to judge as
		// it (and the wasm module) would anywhere else: " tok" is malformed.
		raw = string(b)
		if r, ok := strings.CutSuffix(raw, "\n"); ok {
			raw = strings.TrimSuffix(r, "\r")
		}
	}
	if raw == "" {
		return usageErr("no token given (argument or stdin)")
	}
	doc, err := os.ReadFile(*jwks)
	if err != nil {
		return usageErr("read JWKS: %v", err)
	}
	set, err := verifier.ParseJWKS(doc)
	if err != nil {
		return usageErr("%v", err)
	}
	cfg := verifier.Config{Issuer: *iss, Audience: *aud, Product: *product, Leeway: *leeway}
	if *directives != "" {
		d, err := loadDirectives(ctx, *directives, stderr)
		if err != nil {
			return usageErr("%v", err)
		}
		cfg.Directives = d
	}
	if *now != 0 {
		t := time.Unix(*now, 0)
		cfg.Now = func() time.Time { return t }
	}
	v, err := verifier.New(set, cfg)
	if err != nil {
		return usageErr("%v", err)
	}
	tok, verr := v.Verify(ctx, raw, verifier.Expect{Product: *product, User: *user})
	res := verifyResult{Valid: verr == nil, Reason: verifier.CodeOf(verr).String()}
	if verr != nil {
		res.Detail = verr.Error()
	} else {
		res.User, res.Product, res.JTI, res.Exp, res.Kid = tok.User, tok.Product, tok.ID, tok.ExpiresAt.Unix(), tok.KeyID
	}
	line, _ := json.Marshal(res)
	fmt.Fprintf(stdout, "%s\n", line)
	if verr != nil {
		return exitFailure
	}
	return exitOK
}

// loadDirectives is the --directives source: remote.Directives for an
// http(s) URL (fetched now; a failed fetch is logged to stderr and the token
// then reads directives_unavailable, never valid), else the document in the
// file at src ({"rooms":{"<room>":{"not_before":<Unix seconds>}}}, what
// GET /.well-known/flashgate-directives.json answers). Errors: an invalid
// URL, an unreadable file or one that is not that document.
func loadDirectives(ctx context.Context, src string, stderr io.Writer) (verifier.Directives, error) {
	if strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://") {
		log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		return remote.NewDirectives(ctx, src, &remote.DirectivesConfig{Logger: log})
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return nil, fmt.Errorf("read the directives: %v", err)
	}
	var doc struct {
		Rooms map[string]struct {
			NotBefore int64 `json:"not_before"`
		} `json:"rooms"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.Rooms == nil {
		return nil, fmt.Errorf("%s is not an edge directive document ({\"rooms\":{…}}): %v", src, err)
	}
	nb := make(fileDirectives, len(doc.Rooms))
	for room, r := range doc.Rooms {
		nb[room] = r.NotBefore
	}
	return nb, nil
}

// fileDirectives is a saved directive document: not_before by room.
type fileDirectives map[string]int64

// NotBefore implements verifier.Directives: 0 for a room the document
// does not name.
func (d fileDirectives) NotBefore(_ context.Context, room string) (int64, error) { return d[room], nil }

func sortStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}
