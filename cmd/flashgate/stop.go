package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/flashgate/flashgate/cmd/flashgate/internal/top"
	"github.com/flashgate/flashgate/server"
)

const stopUsage = `Usage: FLASHGATE_ADMIN_TOKEN=… flashgate stop -room R [-url URL] [-json]

Refuses every admission of room R issued up to now (POST /admin/rooms/R/stop):
an open room is paused (open it again with the admin API), completion refuses
those admissions at once (503 room_stopped), and edge verifiers refuse their
tokens within the directive max-age (FLASHGATE_DIRECTIVE_MAX_AGE) plus one
fetch. Prints the room's new not_before (Unix seconds).

`

// runStop is `flashgate stop`: the admin API's stop, with the token from
// FLASHGATE_ADMIN_TOKEN (never a flag: a flag shows in ps).
func runStop(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("stop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), stopUsage); fs.PrintDefaults() }
	base := fs.String("url", "http://127.0.0.1:8080", "base URL of a flashgate serve (its admin API)")
	room := fs.String("room", "", "the room (required)")
	asJSON := fs.Bool("json", false, "print the admin API's answer as JSON")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if code, ok := noArgs(fs, stderr); !ok {
		return code
	}
	if *room == "" {
		fmt.Fprint(stderr, "flashgate stop: -room is required\n\n"+stopUsage)
		return exitUsage
	}
	tok := os.Getenv("FLASHGATE_ADMIN_TOKEN")
	if tok == "" {
		fmt.Fprintln(stderr, "flashgate stop: FLASHGATE_ADMIN_TOKEN is not set (the admin API's bearer token)")
		return exitUsage
	}
	c := top.Client{Base: *base, Token: tok}
	var r server.StopResponse
	if err := c.Do(ctx, http.MethodPost, "/admin/rooms/"+url.PathEscape(*room)+"/stop", &r); err != nil {
		fmt.Fprintf(stderr, "flashgate stop: %v\n", err)
		return exitFailure
	}
	if *asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintf(stdout, "%s\n", b)
		return exitOK
	}
	paused := ""
	if r.Paused {
		paused = "; the room was open and is now paused"
	}
	maxAge := time.Duration(r.EdgeMaxAgeMs) * time.Millisecond
	if maxAge == 0 { // a server from before edge_max_age_ms
		maxAge = time.Duration(r.EdgeMaxAgeS) * time.Second
	}
	fmt.Fprintf(stdout, "room %s stopped: admissions issued before %s (not_before %d) are refused%s; edge verifiers refuse them within %s plus one fetch\n",
		r.Room, time.Unix(r.NotBefore, 0).UTC().Format(time.RFC3339), r.NotBefore, paused, maxAge)
	return exitOK
}
