package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
)

const keysUsage = `Usage:
  flashgate keys generate [-file F] [-force]   create a key ring (active + next key)
  flashgate keys rotate [-file F] [-max-token-lifetime 15m] [-min-key-age 0]
                                               next key signs, active key retires, a new next key is published;
                                               nothing (exit 0) while the next key is younger than -min-key-age
  flashgate keys generate|rotate -kubernetes-secret [NAMESPACE/]NAME [-kubernetes-secret-key K]
                                               the same on a key ring kept in a Kubernetes Secret (in a pod,
                                               with its service account); generate leaves an existing ring as is,
                                               and with -admin-token-key T adds a random admin token under T once
  flashgate keys add-next [-file F]            publish a next key in a ring that has none (then wait, then rotate)
  flashgate keys jwks [-file F]                print the public JWK Set (what /.well-known/jwks.json serves)
  flashgate keys list [-file F] [-json]        list the keys and their status

-file defaults to $FLASHGATE_KEYS_FILE, else flashgate-keys.json.
`

func defaultKeysFile() string {
	if f := os.Getenv("FLASHGATE_KEYS_FILE"); f != "" {
		return f
	}
	return "flashgate-keys.json"
}

func runKeys(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, keysUsage)
		return exitUsage
	}
	sub, args := args[0], args[1:]
	fset := flag.NewFlagSet("keys "+sub, flag.ContinueOnError)
	fset.SetOutput(stderr)
	file := fset.String("file", defaultKeysFile(), "key ring file (private JWK Set)")
	fset.Usage = func() {
		fmt.Fprintf(fset.Output(), "%s\nFlags of flashgate keys %s:\n", keysUsage, sub)
		fset.PrintDefaults()
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "flashgate keys %s: %v\n", sub, err)
		return exitFailure
	}
	// parse parses the subcommand's flags (defined before the call) and
	// refuses positional arguments.
	parse := func() (int, bool) {
		if code, ok := parseFlags(fset, args, stdout, stderr); !ok {
			return code, false
		}
		return noArgs(fset, stderr)
	}
	var secretName, secretKey *string
	if sub == "generate" || sub == "rotate" {
		secretName = fset.String("kubernetes-secret", "", "keep the ring in this Kubernetes Secret ([NAMESPACE/]NAME) instead of -file: "+
			"read and written through the API server with the pod's service account")
		secretKey = fset.String("kubernetes-secret-key", "flashgate-keys.json", "the Secret's key that holds the ring")
	}
	switch sub {
	case "generate":
		force := fset.Bool("force", false, "overwrite an existing key ring (tokens it signed stop verifying)")
		adminKey := fset.String("admin-token-key", "", "with -kubernetes-secret: also keep a random admin token (FLASHGATE_ADMIN_TOKEN, "+
			"48 base64url characters) under this key of the Secret, created when absent and never changed (the Helm chart's install hook)")
		lotteryKey := fset.String("lottery-key-key", "", "with -kubernetes-secret: also keep a random lottery key (FLASHGATE_LOTTERY_KEY, "+
			"32 bytes, standard base64) under this key of the Secret, created when absent and never changed: every replica "+
			"derives the same lottery secrets from it, and it never reaches Redis (the Helm chart's install hook)")
		if code, ok := parse(); !ok {
			return code
		}
		if *secretName != "" {
			return keysInSecret(sub, *secretName, *secretKey, *force, 0, stdout, stderr, 0, *adminKey, *lotteryKey)
		}
		if *adminKey != "" || *lotteryKey != "" {
			return fail(errors.New("-admin-token-key and -lottery-key-key need -kubernetes-secret"))
		}
		if fi, err := os.Stat(*file); err == nil && fi.IsDir() {
			return fail(fmt.Errorf("%w: %s; give a file path with -file, e.g. %s", keys.ErrIsDirectory, *file, filepath.Join(*file, "flashgate-keys.json")))
		} else if err == nil && !*force {
			return fail(fmt.Errorf("%s exists; use -force to replace it (every token it signed stops verifying) or `flashgate keys rotate`", *file))
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fail(err)
		}
		r, err := keys.Generate(time.Now())
		if err != nil {
			return fail(err)
		}
		if err := r.Save(*file); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "generated %s (mode 0600)\n", *file)
		writeKeyTable(stdout, r.Keys())
		return exitOK
	case "rotate":
		maxLife := fset.Duration("max-token-lifetime", issuer.MaxSessionDuration,
			"longest admission token lifetime the issuer mints (the retired key stays published this long, plus a margin)")
		minAge := fset.Duration("min-key-age", 0, "rotate only when the next key was created (published) at least this long ago; "+
			"otherwise print why and exit 0: a retried or repeated rotation within the period does nothing, and a key verifiers "+
			"have not fetched yet never signs (the Helm chart's CronJob sets it)")
		if code, ok := parse(); !ok {
			return code
		}
		if *minAge < 0 {
			return fail(fmt.Errorf("-min-key-age must be >= 0, got %s", *minAge))
		}
		if *secretName != "" {
			return keysInSecret(sub, *secretName, *secretKey, false, *maxLife, stdout, stderr, *minAge, "", "")
		}
		r, err := keys.Load(*file)
		if err != nil {
			return fail(err)
		}
		old := r.ActiveKeyID()
		now := time.Now()
		if why, due := rotationDue(r, now, *minAge); !due {
			fmt.Fprintf(stdout, "%s not rotated: %s\n", *file, why)
			return exitOK
		}
		if err := r.Rotate(now, *maxLife); err != nil {
			return fail(err)
		}
		warnShortLifetime(stderr, *maxLife, now)
		if err := r.Save(*file); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "rotated %s: %s retired, %s now signs\n", *file, old, r.ActiveKeyID())
		writeKeyTable(stdout, r.Keys())
		return exitOK
	case "add-next":
		if code, ok := parse(); !ok {
			return code
		}
		r, err := keys.Load(*file)
		if err != nil {
			return fail(err)
		}
		if err := r.AddNextKey(time.Now()); err != nil {
			return fail(err)
		}
		if err := r.Save(*file); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "added a next key to %s: it is published now; rotate once verifiers have refreshed their JWKS\n", *file)
		writeKeyTable(stdout, r.Keys())
		return exitOK
	case "jwks":
		if code, ok := parse(); !ok {
			return code
		}
		r, err := keys.Load(*file)
		if err != nil {
			return fail(err)
		}
		doc, err := r.PublicJWKS()
		if err != nil {
			return fail(err)
		}
		var out bytes.Buffer
		if err := json.Indent(&out, doc, "", "  "); err != nil {
			return fail(err)
		}
		out.WriteByte('\n')
		_, _ = stdout.Write(out.Bytes())
		return exitOK
	case "list":
		asJSON := fset.Bool("json", false, "print JSON")
		if code, ok := parse(); !ok {
			return code
		}
		r, err := keys.Load(*file)
		if err != nil {
			return fail(err)
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(r.Keys())
			return exitOK
		}
		writeKeyTable(stdout, r.Keys())
		return exitOK
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, keysUsage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "flashgate keys: unknown subcommand %q\n\n%s", sub, keysUsage)
		return exitUsage
	}
}

// keysInSecret runs `keys generate` or `keys rotate` (sub) on the ring in
// the Kubernetes Secret name, key key. generate creates the Secret, or adds
// the key to a Secret without it, and leaves an existing ring unchanged
// (exit 0, so an install hook may run it on every upgrade) unless force.
// rotate reads the ring, rotates it with maxLife and writes it back under
// the Secret's resourceVersion: a concurrent change fails the rotation
// (409 Conflict) instead of being overwritten; run it again. A rotation
// whose next key is younger than minAge does nothing (exit 0): a retry
// after a conflict, a Job's restart, or a second release sharing the Secret
// finds the key the first rotation created and leaves the ring as it is.
// With adminKey, generate also adds a random admin token under that key
// when the Secret lacks it (and never changes one it has), so the token
// is made once in the cluster, never rendered by Helm; with lotteryKey,
// likewise a random 32-byte lottery key (standard base64).
func keysInSecret(sub, name, key string, force bool, maxLife time.Duration, stdout, stderr io.Writer, minAge time.Duration, adminKey, lotteryKey string) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "flashgate keys %s: %v\n", sub, err)
		return exitFailure
	}
	ks, err := inClusterSecret(name, key)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obj, cur, err := ks.get(ctx)
	if err != nil && !errors.Is(err, errSecretNotFound) {
		return fail(err)
	}
	now := time.Now()
	var r *keys.Ring
	var extra map[string][]byte
	if sub == "generate" {
		for _, x := range []struct {
			key, what string
			n         int
			enc       *base64.Encoding
		}{{adminKey, "admin token", 36, base64.RawURLEncoding}, {lotteryKey, "lottery key", 32, base64.StdEncoding}} {
			if x.key == "" || has(obj, x.key) {
				continue
			}
			b := make([]byte, x.n)
			if _, err := rand.Read(b); err != nil {
				return fail(err)
			}
			if extra == nil {
				extra = map[string][]byte{}
			}
			extra[x.key] = []byte(x.enc.EncodeToString(b))
			fmt.Fprintf(stdout, "%s: a new %s under %s\n", ks, x.what, x.key)
		}
		switch {
		case cur != nil && !force && extra == nil:
			fmt.Fprintf(stdout, "%s holds a key ring already; left unchanged\n", ks)
			return exitOK
		case cur != nil && !force:
			if r, err = keys.ParsePrivate(cur); err != nil { // kept as it is
				return fail(fmt.Errorf("%s: %w", ks, err))
			}
		default:
			if r, err = keys.Generate(now); err != nil {
				return fail(err)
			}
		}
	} else {
		if cur == nil {
			return fail(fmt.Errorf("%s: no key ring (run flashgate keys generate -kubernetes-secret first)", ks))
		}
		if r, err = keys.ParsePrivate(cur); err != nil {
			return fail(fmt.Errorf("%s: %w", ks, err))
		}
		if why, due := rotationDue(r, now, minAge); !due {
			fmt.Fprintf(stdout, "%s not rotated: %s\n", ks, why)
			return exitOK
		}
		if err := r.Rotate(now, maxLife); err != nil {
			return fail(err)
		}
		warnShortLifetime(stderr, maxLife, now)
	}
	data, err := r.MarshalPrivate()
	if err != nil {
		return fail(err)
	}
	if obj == nil {
		err = ks.create(ctx, data, extra)
	} else {
		err = ks.update(ctx, obj, data, extra)
	}
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "%sd %s: %s signs\n", strings.TrimSuffix(sub, "e"), ks, r.ActiveKeyID())
	writeKeyTable(stdout, r.Keys())
	return exitOK
}

// rotationDue reports whether ring r may rotate at now under -min-key-age
// minAge: its next key was created at least minAge ago. Rotate creates a
// fresh next key, so within minAge of a rotation no second one happens,
// and a next key is published that long before it signs. why says why not.
// A ring without a next key is due (Rotate then explains ErrNoNextKey).
func rotationDue(r *keys.Ring, now time.Time, minAge time.Duration) (why string, due bool) {
	for _, k := range r.Keys() {
		if k.Status != keys.StatusNext {
			continue
		}
		if age := now.Sub(k.Created); age < minAge {
			return fmt.Sprintf("the next key %s was created %s ago, less than -min-key-age %s "+
				"(a rotation already ran in this period; it becomes due at %s)",
				k.ID, age.Truncate(time.Second), minAge, k.Created.Add(minAge).UTC().Format(time.RFC3339)), false
		}
	}
	return "", true
}

// warnShortLifetime warns on w when maxLife (keys rotate
// -max-token-lifetime) is shorter than issuer.MaxSessionDuration, the
// longest session, and so admission token lifetime, a room may have. That
// bound is what the command can know: it reads the key ring file only, not
// Redis, so it cannot see the sessions rooms are configured with. A token
// that a room with a longer session signed just before the rotation stops
// verifying when the retired key leaves the JWKS, at now + maxLife +
// keys.RetireMargin.
func warnShortLifetime(w io.Writer, maxLife time.Duration, now time.Time) {
	if maxLife >= issuer.MaxSessionDuration {
		return
	}
	fmt.Fprintf(w, "flashgate keys rotate: warning: -max-token-lifetime %s is shorter than the longest session a room may have (%s): "+
		"admission tokens that a room with a longer session signed just before this rotation stop verifying when the retired key "+
		"leaves the JWKS at %s; keep the default (%s) unless every room's session is at most %s\n",
		maxLife, issuer.MaxSessionDuration, now.Add(maxLife+keys.RetireMargin).UTC().Format(time.RFC3339),
		issuer.MaxSessionDuration, maxLife)
}

func noArgs(fset *flag.FlagSet, stderr io.Writer) (int, bool) {
	if fset.NArg() > 0 {
		fmt.Fprintf(stderr, "flashgate %s: unexpected argument %q\n", fset.Name(), fset.Arg(0))
		return exitUsage, false
	}
	return 0, true
}

func writeKeyTable(w io.Writer, ks []keys.KeyInfo) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KID\tSTATUS\tCREATED\tRETIRE UNTIL")
	for _, k := range ks {
		until := "-"
		if !k.RetireUntil.IsZero() {
			until = k.RetireUntil.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.ID, k.Status, k.Created.UTC().Format(time.RFC3339), until)
	}
	_ = tw.Flush()
}
