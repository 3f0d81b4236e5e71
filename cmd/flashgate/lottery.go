package main

import (
	"cmp"
	"context"
	"encoding/base64"
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

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/server"
	"github.com/flashgate/flashgate/verifier"
)

// Exit statuses of `flashgate lottery verify`, one per failure (docs/rooms.md#pre-queue-lottery).
const (
	exitReceiptInvalid = 1 // not a receipt the JWKS signed: forged, tampered, an admission token, malformed
	exitLotteryInput   = 3 // the JWKS or room view could not be read or parsed
	exitOtherRoom      = 4 // the receipt is for another room or epoch than the room view
	exitNotDrawn       = 5 // the room view shows no drawn lottery yet: try again after the opening
	exitSeedMismatch   = 6 // the public seed does not hash to the receipt's commitment
	exitNotInPreQueue  = 7 // the receipt's arrival is after the cutoff
)

const lotteryUsage = `Usage: flashgate lottery verify --receipt R [--url BASE] [--jwks URL|FILE] [--room-view URL|FILE]

Checks a join receipt of a shuffle room's pre-queue from public data alone and
prints one JSON line {"valid":…,"reason":…,"place":…}: the receipt's signature
against the issuer's JWK Set, its room and epoch against the public room view
(GET /v1/rooms/{room}), that SHA-256 of the view's seed (domain-separated by
room and epoch) is the commitment the receipt carries, and the drawn place of
its arrival among the pre-queue's arrival numbers 1 … cutoff.

R is the receipt itself, a file holding it (as the waiting page's download,
a JSON object with "receipt", or the bare token), or "-" for stdin.
--url BASE reads the JWKS from BASE/.well-known/jwks.json and the room view
from BASE/v1/rooms/{the receipt's room}; --jwks and --room-view override them.

Exit status: 0 verified; 1 receipt invalid (forged, tampered, not a receipt);
2 usage error; 3 JWKS or room view unreadable; 4 another room or epoch;
5 not drawn yet; 6 seed does not match the commitment; 7 arrival not in the
drawn pre-queue.

`

// lotteryResult is the one JSON line `flashgate lottery verify` prints.
type lotteryResult struct {
	Valid   bool   `json:"valid"`
	Reason  string `json:"reason"`
	Room    string `json:"room,omitempty"`
	Epoch   string `json:"epoch,omitempty"`
	User    string `json:"user,omitempty"`
	Arrival int64  `json:"arrival,omitempty"`
	Place   int64  `json:"place,omitempty"`
	Cutoff  int64  `json:"cutoff,omitempty"`
	Kid     string `json:"kid,omitempty"`
	Detail  string `json:"detail,omitempty"`
	// Randomness is the verified drand round's randomness ("" without a
	// beacon); Influence which places whoever runs the issuer could have
	// steered ("none" with a beacon fixed after the entrants).
	Randomness string `json:"randomness,omitempty"`
	Influence  string `json:"influence,omitempty"`
}

func runLottery(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "verify" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			fmt.Fprint(stdout, lotteryUsage)
			return exitOK
		}
		fmt.Fprint(stderr, lotteryUsage)
		return exitUsage
	}
	fset := flag.NewFlagSet("lottery verify", flag.ContinueOnError)
	fset.SetOutput(stderr)
	receipt := fset.String("receipt", "", "the join receipt, a file holding it, or - for stdin (required)")
	base := fset.String("url", "", "the issuer's base URL, e.g. https://queue.example.com")
	jwks := fset.String("jwks", "", "JWK Set: URL or file (default BASE/.well-known/jwks.json)")
	view := fset.String("room-view", "", "public room view: URL or file (default BASE/v1/rooms/{room})")
	fset.Usage = func() { fmt.Fprint(fset.Output(), lotteryUsage); fset.PrintDefaults() }
	pos, err := parseInterspersed(fset, args[1:], stdout, stderr)
	if err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		return exitUsage
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "flashgate lottery verify: "+format+"\n", a...)
		return exitUsage
	}
	if len(pos) > 0 {
		return usageErr("unexpected arguments %q", pos)
	}
	if *receipt == "" {
		return usageErr("--receipt is required")
	}
	if *base == "" && (*jwks == "" || *view == "") {
		return usageErr("give --url, or both --jwks and --room-view")
	}
	tok, err := readReceipt(*receipt, stdin)
	if err != nil {
		return usageErr("%v", err)
	}
	res := lotteryResult{}
	emit := func(code int) int {
		line, _ := json.Marshal(res)
		fmt.Fprintf(stdout, "%s\n", line)
		return code
	}
	fail := func(code int, reason string, err error) int {
		res.Reason, res.Detail = reason, err.Error()
		return emit(code)
	}
	if *jwks == "" {
		*jwks = strings.TrimSuffix(*base, "/") + "/.well-known/jwks.json"
	}
	if *view == "" {
		room := receiptRoom(tok)
		if room == "" {
			return fail(exitReceiptInvalid, "receipt_invalid", errors.New("receipt invalid: no room in its claims"))
		}
		*view = strings.TrimSuffix(*base, "/") + "/v1/rooms/" + url.PathEscape(room)
	}
	doc, err := fetchPublic(ctx, *jwks)
	if err != nil {
		return fail(exitLotteryInput, "jwks_unavailable", err)
	}
	keys, err := verifier.ParseJWKS(doc)
	if err != nil {
		return fail(exitLotteryInput, "jwks_unavailable", err)
	}
	vdoc, err := fetchPublic(ctx, *view)
	if err != nil {
		return fail(exitLotteryInput, "room_view_unavailable", err)
	}
	var rv server.RoomView
	if err := json.Unmarshal(vdoc, &rv); err != nil || rv.Room == "" {
		return fail(exitLotteryInput, "room_view_unavailable", fmt.Errorf("%s: not a room view (GET /v1/rooms/{room}): %v", *view, err))
	}
	c, err := issuer.VerifyReceipt(ctx, tok, keys, rv.RoomLottery())
	res.Room, res.Epoch, res.User, res.Arrival, res.Kid = c.Claims.Room, c.Claims.Epoch, c.Claims.Sub, c.Claims.Arrival, c.Kid
	for _, f := range []struct {
		err    error
		code   int
		reason string
	}{
		{issuer.ErrReceiptInvalid, exitReceiptInvalid, "receipt_invalid"},
		{issuer.ErrReceiptOtherRoom, exitOtherRoom, "other_room"},
		{issuer.ErrLotteryNotDrawn, exitNotDrawn, "not_drawn"},
		{issuer.ErrSeedMismatch, exitSeedMismatch, "seed_mismatch"},
		{issuer.ErrBeaconInvalid, exitSeedMismatch, "beacon_invalid"},
		{issuer.ErrNotInPreQueue, exitNotInPreQueue, "not_in_prequeue"},
	} {
		if errors.Is(err, f.err) {
			return fail(f.code, f.reason, err)
		}
	}
	if err != nil {
		return fail(exitFailure, "error", err)
	}
	res.Valid, res.Reason, res.Place, res.Cutoff = true, "ok", c.Place, c.Cutoff
	res.Randomness, res.Influence = c.Randomness, cmp.Or(c.Influence, "none")
	return emit(exitOK)
}

// readReceipt returns the receipt r names: "-" reads stdin, an existing
// file is read, anything else is the receipt itself. A JSON object's
// "receipt" member (the waiting page's download) is taken; surrounding
// white space is dropped.
func readReceipt(r string, stdin io.Reader) (string, error) {
	var b []byte
	switch st, err := os.Stat(r); {
	case r == "-":
		if b, err = io.ReadAll(io.LimitReader(stdin, 1<<20)); err != nil {
			return "", fmt.Errorf("read the receipt from stdin: %w", err)
		}
	case err == nil && st.Mode().IsRegular():
		if b, err = os.ReadFile(r); err != nil {
			return "", fmt.Errorf("read the receipt: %w", err)
		}
	default:
		b = []byte(r)
	}
	s := strings.TrimSpace(string(b))
	if strings.HasPrefix(s, "{") {
		var doc struct {
			Receipt string `json:"receipt"`
		}
		if err := json.Unmarshal([]byte(s), &doc); err != nil || doc.Receipt == "" {
			return "", errors.New(`the receipt file is JSON without a "receipt" member`)
		}
		s = doc.Receipt
	}
	if s == "" {
		return "", errors.New("empty receipt")
	}
	return s, nil
}

// receiptRoom returns the room claim of tok, unverified ("" if unreadable):
// only to find the room view's URL; VerifyReceipt checks everything.
func receiptRoom(tok string) string {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c flashgate.ReceiptClaims
	_ = json.Unmarshal(b, &c)
	return c.Room
}

// fetchPublic reads a public document: an http(s) URL (GET, 10 s, status
// 200) or a file; at most 1 MiB.
func fetchPublic(ctx context.Context, src string) ([]byte, error) {
	if !strings.HasPrefix(src, "http://") && !strings.HasPrefix(src, "https://") {
		return os.ReadFile(src)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", src, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %.200s", src, resp.Status, b)
	}
	return b, nil
}
