package problem_test

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/testkit"
	"github.com/flashgate/flashgate/problem"
	"github.com/flashgate/flashgate/verifier"
)

var update = flag.Bool("update", false, "rewrite the generated docs (docs/errors.md) from the table")

// errorsDoc is docs/errors.md, relative to this package's directory.
const errorsDoc = "../docs/errors.md"

// tokenReasons are the reasons a refused admission token is answered by:
// "missing" (no token), then every verifier.Code in its declared order.
func tokenReasons() []string {
	reasons := []string{"missing"}
	for c := verifier.Code(1); c.String() != "unknown"; c++ {
		reasons = append(reasons, c.String())
	}
	return reasons
}

// writeErrorsDoc writes docs/errors.md from the table: the domain codes,
// the server's own codes, then the verifier's reasons, each in declared
// order. Deterministic: no map ranged over, no clock.
func writeErrorsDoc(w io.Writer) {
	fmt.Fprint(w, "# Error codes\n\n"+
		"<!-- Generated from problem/table.go. Do not edit: change the table and run `make docs`\n"+
		"     (go generate ./problem). -->\n\n"+
		"Every error answer is an RFC 9457 problem document (`Content-Type: application/problem+json`,\n"+
		"`Cache-Control: no-store`): `type` is `"+problem.Base+"` followed by the code with `-` for `_`,\n"+
		"`title` and `status` as below, `detail` for the case at hand, and `code`. An answer with a\n"+
		"Retry-After (seconds) may be retried after it; a WWW-Authenticate answer names the credential\n"+
		"that was refused (RFC 6750). `problem.Lookup` is this table; `problem.Parse` reads a document\n"+
		"back to its code. An unknown code is answered as `internal`. Three answers add a Retry-After of\n"+
		"their own: `banned` (until the ban ends), `not_admitted` and `rate_limited` (when to ask again).\n")
	domain := map[string]bool{}
	for _, c := range flashgate.Codes {
		domain[string(c)] = true
	}
	all := problem.Declared()
	section := func(title, about string, codes []string) {
		fmt.Fprintf(w, "\n## %s\n\n%s\n\n| code | status | title | Retry-After | WWW-Authenticate |\n|---|---|---|---|---|\n", title, about)
		for _, c := range codes {
			k := problem.Lookup(c)
			fmt.Fprintf(w, "| `%s` | %s | %s | %s | %s |\n", c, status(k.Status), k.Title, retryAfter(k.RetryAfter), challenge(k.Challenge))
		}
	}
	section("Domain codes", "The `flashgate.Code` values the issuer and the order side return (`flashgate.Error`).",
		slices.DeleteFunc(slices.Clone(all), func(c string) bool { return !domain[c] }))
	section("Server codes", "The HTTP layer's own codes: requests refused before they reach the domain.",
		slices.DeleteFunc(slices.Clone(all), func(c string) bool { return domain[c] }))

	fmt.Fprint(w, "\n## Refused admission tokens\n\n"+
		"A refused admission token (`verifier.Middleware`, `POST /v1/complete`) is answered by the\n"+
		"verifier's reason: `type` is `"+problem.TypeURI("token_")+"` followed by the reason with `-`\n"+
		"for `_`, the `reason` member names it, and the status, Retry-After and WWW-Authenticate are\n"+
		"those of the code it is answered as (`problem.Token`). `missing` is a request without a token.\n\n"+
		"| reason | answered as | status | title | Retry-After | WWW-Authenticate |\n|---|---|---|---|---|---|\n")
	for _, r := range tokenReasons() {
		k := problem.Token(r)
		fmt.Fprintf(w, "| `%s` | `%s` | %s | %s | %s | %s |\n", r, k.Code, status(k.Status), k.Title, retryAfter(k.RetryAfter), challenge(k.Challenge))
	}
}

func status(s int) string { return strconv.Itoa(s) + " " + http.StatusText(s) }

func retryAfter(s int) string {
	if s == 0 {
		return "—"
	}
	return strconv.Itoa(s) + " s"
}

func challenge(c string) string {
	if c == "" {
		return "—"
	}
	return "`" + strings.ReplaceAll(c, "|", `\|`) + "`"
}

// TestErrorsDoc: docs/errors.md is exactly writeErrorsDoc's output, so the
// reference cannot drift from the table; -update rewrites it. Every code
// and every verifier reason has a row.
func TestErrorsDoc(t *testing.T) {
	var b bytes.Buffer
	writeErrorsDoc(&b)
	got := b.String()
	testkit.Golden(t, errorsDoc, []byte(got), *update, "`make docs` (go test ./problem -run '^TestErrorsDoc$' -update)")
	for _, c := range append(problem.Declared(), tokenReasons()...) {
		if !strings.Contains(got, "| `"+c+"` |") {
			t.Errorf("%s has no row", c)
		}
	}
	if n := len(problem.Declared()); n < len(flashgate.Codes)+10 {
		t.Errorf("problem.Declared() lists %d codes", n)
	}
}
