package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/server"
)

const inviteUsage = `Usage:
  flashgate invite -room R [-lane priority|bypass] [-user U] [-ttl 24h | -expires RFC3339]
                   [-reusable] [-count N] [-file F] [-issuer ISS] [-json]

Signs invites to room R with the key ring file (the same keys the server
signs admission tokens with; no server or Redis needed) and prints one
token per line (-json: the admin API's answer). The user enters with
{"invite": TOKEN} on POST /v1/rooms/R/enter, or opens /wait/R?invite=TOKEN
and confirms with the page's button. Each invite takes one place unless
-reusable (then anyone holding it, until it expires: a leaked link is a
crowd in the lane).
-issuer must be the server's FLASHGATE_ISSUER (the default reads it).
An invite verifies while its key is published: after "flashgate keys rotate",
invites signed with the old key stop working when it retires.

`

// runInvite signs invites with the local key ring file (issuer.NewInvites):
// wiring only, the rules are the issuer's.
func runInvite(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("invite", flag.ContinueOnError)
	fset.SetOutput(stderr)
	fset.Usage = func() { fmt.Fprint(fset.Output(), inviteUsage); fset.PrintDefaults() }
	file := fset.String("file", defaultKeysFile(), "key ring file (private JWK Set)")
	iss := fset.String("issuer", envOr("FLASHGATE_ISSUER", issuer.DefaultIssuer), "the server's iss (FLASHGATE_ISSUER)")
	room := fset.String("room", "", "the room (required)")
	lane := fset.String("lane", flashgate.LanePriority, "priority | bypass")
	user := fset.String("user", "", "bind each invite to this user id (default: anyone holding it)")
	ttl := fset.Duration("ttl", issuer.DefaultInviteTTL, "validity from now (at most 720h)")
	expires := fset.String("expires", "", "expiry as an RFC 3339 time (instead of -ttl)")
	reusable := fset.Bool("reusable", false, "each invite admits any number of holders until it expires (default: one place per invite)")
	once := fset.Bool("single-use", true, "deprecated: invites are single use unless -reusable")
	count := fset.Int("count", 1, "how many invites (1 … 1000)")
	asJSON := fset.Bool("json", false, "print the invites as JSON")
	if code, ok := parseFlags(fset, args, stdout, stderr); !ok {
		return code
	}
	if code, ok := noArgs(fset, stderr); !ok {
		return code
	}
	if !*once || (*reusable && flagSet(fset, "single-use")) {
		fmt.Fprint(stderr, "flashgate invite: invites are single use by default; -reusable signs reusable ones (-single-use is no longer needed)\n\n"+inviteUsage)
		return exitUsage
	}
	if *room == "" {
		fmt.Fprint(stderr, "flashgate invite: -room is required\n\n"+inviteUsage)
		return exitUsage
	}
	o := issuer.InviteOptions{Lane: *lane, User: *user, TTL: *ttl, Reusable: *reusable, Count: *count}
	if *expires != "" {
		t, err := time.Parse(time.RFC3339, *expires)
		if err != nil {
			fmt.Fprintf(stderr, "flashgate invite: -expires: %v\n", err)
			return exitUsage
		}
		o.ExpiresAt = t
	}
	ring, err := keys.Load(*file)
	if err != nil {
		fmt.Fprintf(stderr, "flashgate invite: %v\n", err)
		return exitFailure
	}
	invs, err := issuer.NewInvites(ring, *iss, *room, o, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "flashgate invite: %v\n", err)
		return exitFailure
	}
	if *asJSON {
		out := server.InvitesResponse{Invites: make([]server.InviteJSON, 0, len(invs))}
		for _, v := range invs {
			out.Invites = append(out.Invites, server.InviteJSON{Token: v.Token, ID: v.ID, Room: v.Room, Lane: v.Lane,
				User: v.User, SingleUse: v.SingleUse, IssuedAtMs: v.IssuedAt.UnixMilli(), ExpiresAtMs: v.ExpiresAt.UnixMilli()})
		}
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return exitOK
	}
	for _, v := range invs {
		fmt.Fprintln(stdout, v.Token)
	}
	return exitOK
}

// flagSet reports whether the command line set the flag called name.
func flagSet(fset *flag.FlagSet, name string) (set bool) {
	fset.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
