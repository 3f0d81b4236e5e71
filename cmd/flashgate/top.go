package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/flashgate/flashgate/cmd/flashgate/internal/top"
)

// runTop is `flashgate top`: cmd/flashgate/internal/top's view of every room, read from
// the admin API of a running flashgate. The admin token comes from
// FLASHGATE_ADMIN_TOKEN, never a flag (a flag shows in ps).
func runTop(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("top", flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", "http://127.0.0.1:8080", "base URL of a flashgate serve (its admin API)")
	every := fs.Duration("every", time.Second, "refresh period")
	frames := fs.Int("n", 0, "stop after this many refreshes (0: until interrupted)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: FLASHGATE_ADMIN_TOKEN=… flashgate top [-url URL] [-every 1s] [-n N]\n\n"+
			"Shows every room — state, waiting, live/capacity, admissions per minute (over the last minute),\n"+
			"the ETA of the tail of the line at that pace, errors — refreshed from the admin API.\n\n")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 || *every <= 0 || *frames < 0 {
		fmt.Fprintln(stderr, "flashgate top: takes no arguments; -every must be positive and -n at least 0 (see -h)")
		return exitUsage
	}
	tok := os.Getenv("FLASHGATE_ADMIN_TOKEN")
	if tok == "" {
		fmt.Fprintln(stderr, "flashgate top: FLASHGATE_ADMIN_TOKEN is not set (the admin API's bearer token)")
		return exitUsage
	}
	err := top.Run(ctx, stdout, top.Options{Client: top.Client{Base: *base, Token: tok},
		Every: *every, Frames: *frames, Clear: isTerminal(stdout)})
	if err != nil {
		fmt.Fprintf(stderr, "flashgate top: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// isTerminal reports whether w is a character device (a terminal): only
// then does top clear the screen between refreshes.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
