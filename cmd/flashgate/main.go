// Command flashgate is the flashgate virtual waiting room: the issuer server,
// key management, an offline token checker and a flash-sale simulation.
//
//	flashgate serve                    run the issuer (config from the environment; -h lists it)
//	flashgate keys generate|rotate|jwks|list
//	flashgate invite -room R [-lane priority|bypass] …   sign invites with the key ring file
//	flashgate verify --jwks F --issuer I --audience A --product P TOKEN
//	flashgate simulate [--users N …]   drive a simulated flash sale over HTTP
//	flashgate top [-url URL]           every room at a glance, from the admin API
//	flashgate stop -room R             refuse every admission of R issued up to now (admin API)
//	flashgate journal show|report      ask the journal (PostgreSQL) about a buyer or a room
//	flashgate journal run              copy the rooms' journal streams into PostgreSQL
//	flashgate restore --room R         rebuild a room lost with Redis's data from the journal
//	flashgate smoke [-url URL]         one buyer's walk through a running issuer (helm test)
//	flashgate version
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = ""

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1 // an error, an invalid token, a broken invariant
	exitUsage   = 2 // bad command line
)

const usage = `flashgate — a virtual waiting room for flash sales

Usage:
  flashgate serve [-h]                 run the issuer server (configured by environment variables; -h lists them)
  flashgate keys generate [-file F] [-force]
  flashgate keys rotate [-file F] [-max-token-lifetime 15m]
  flashgate keys jwks [-file F]        print the public JWK Set
  flashgate keys list [-file F] [-json]
  flashgate invite -room R [-lane priority|bypass] [-user U] [-ttl 24h] [-reusable] [-count N] [-file F]
                                       sign invites (priority lane, bypass) with the key ring file
  flashgate verify --jwks FILE --issuer ISS --audience AUD --product P [--user U]
                   [--now UNIX_SECONDS] [--leeway 0s] [TOKEN | -]
  flashgate lottery verify --receipt R [--url BASE] [--jwks URL|FILE] [--room-view URL|FILE]
                                       check a join receipt and print its drawn place (public data only)
  flashgate simulate [flags]           simulate a flash sale end to end (-h lists the flags)
  flashgate top [-url URL] [-every 1s] every room at a glance, from the admin API (FLASHGATE_ADMIN_TOKEN)
  flashgate stop -room R [-url URL] [-json]
                                       refuse every admission of R issued up to now, at completion and at the edge
  flashgate journal show --room R --user U [--all] [--json]
                                       a buyer's entries in the journal (FLASHGATE_JOURNAL_DSN)
  flashgate journal report --room R [--epoch E] [--json]
                                       a room's outcomes and wait p50/p95 per minute, from the journal
  flashgate journal run [-h]           copy the rooms' journal streams into PostgreSQL (environment; -h lists it)
  flashgate restore --room R [--dry-run] [--dsn DSN]
                                       rebuild a room lost with Redis's data from the journal (PostgreSQL)
  flashgate smoke [-url URL] [-room R] one buyer through a running issuer: JWKS, test room, enter, exchange,
                                       token verified, complete (FLASHGATE_ADMIN_TOKEN; the chart's helm test)
  flashgate version
  flashgate help

Run "flashgate <command> -h" for the flags of a command.
`

// run is main without the process: it returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return runServe(ctx, rest, stdout, stderr)
	case "keys":
		return runKeys(rest, stdout, stderr)
	case "invite":
		return runInvite(rest, stdout, stderr)
	case "verify":
		return runVerify(ctx, rest, stdin, stdout, stderr)
	case "lottery":
		return runLottery(ctx, rest, stdin, stdout, stderr)
	case "simulate":
		return runSimulate(ctx, rest, stdout, stderr)
	case "top":
		return runTop(ctx, rest, stdout, stderr)
	case "stop":
		return runStop(ctx, rest, stdout, stderr)
	case "journal":
		return runJournal(ctx, rest, stdout, stderr)
	case "restore":
		return runRestore(ctx, rest, stdout, stderr)
	case "smoke":
		return runSmoke(ctx, rest, stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "flashgate", versionString())
		return exitOK
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage) // asked for: stdout, success (a missing command is the usage error)
		return exitOK
	default:
		fmt.Fprintf(stderr, "flashgate: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
}

func versionString() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v + " " + bi.GoVersion
}

// parseFlags parses args into fs. -h, -help or --help prints fs.Usage to
// stdout and reports exitOK; a bad flag prints the error and the usage to
// stderr and reports exitUsage; ok is false when the caller should return
// code. Usage functions write to fs.Output(), which parseFlags points at
// the right stream.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	if err := routeHelp(fs, stdout, stderr, func() error { return fs.Parse(args) }); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return 0, true
}

// routeHelp runs parse with fs's output captured, then writes what it
// printed to stdout when it was help (flag.ErrHelp) and to stderr
// otherwise; fs's output is stderr afterwards.
func routeHelp(fs *flag.FlagSet, stdout, stderr io.Writer, parse func() error) error {
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := parse()
	fs.SetOutput(stderr)
	if errors.Is(err, flag.ErrHelp) {
		_, _ = stdout.Write(buf.Bytes())
	} else {
		_, _ = stderr.Write(buf.Bytes())
	}
	return err
}

// parseInterspersed parses flags that may follow positional arguments
// ("verify TOKEN --now 5") and returns the positional ones. Help and
// errors are printed as parseFlags prints them.
func parseInterspersed(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (pos []string, err error) {
	err = routeHelp(fs, stdout, stderr, func() error {
		for {
			if err := fs.Parse(args); err != nil {
				return err
			}
			args = fs.Args()
			if len(args) == 0 {
				return nil
			}
			if args[0] == "--" {
				pos = append(pos, args[1:]...)
				return nil
			}
			pos = append(pos, args[0])
			args = args[1:]
		}
	})
	if err != nil {
		return nil, err
	}
	return pos, nil
}
