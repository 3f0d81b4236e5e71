// Command flashgate is the flashgate virtual waiting room: the issuer server,
// key management, an offline token checker and a flash-sale simulation.
//
//	flashgate serve                    run the issuer (config from the environment; -h lists it)
//	flashgate keys generate|rotate|jwks|list
//	flashgate invite -room R [-lane priority|bypass] …   sign invites with the key ring file
//	flashgate verify --jwks F --issuer I --audience A --product P TOKEN
//	flashgate simulate [--users N …]   drive a simulated flash sale over HTTP
//	flashgate version
package main

import (
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
  flashgate invite -room R [-lane priority|bypass] [-user U] [-ttl 24h] [-single-use] [-count N] [-file F]
                                       sign invites (priority lane, bypass) with the key ring file
  flashgate verify --jwks FILE --issuer ISS --audience AUD --product P [--user U]
                   [--now UNIX_SECONDS] [--leeway 0s] [TOKEN | -]
  flashgate simulate [flags]           simulate a flash sale end to end (-h lists the flags)
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
	case "simulate":
		return runSimulate(ctx, rest, stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "flashgate", versionString())
		return exitOK
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stderr, usage)
		return exitUsage
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

// parseFlags parses fs, reporting -h as exitOK (help printed) and errors
// as exitUsage; ok is false when the caller should return code.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return 0, true
}

// parseInterspersed parses flags that may follow positional arguments
// ("verify TOKEN --now 5") and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
