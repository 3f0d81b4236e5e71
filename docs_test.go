package flashgate_test

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestDocLinks: every relative link and #anchor of the repository's
// Markdown files resolves, and so does every citation of a document in
// code and docs: README "Section", docs/file.md "Section", docs/file.md#anchor
// and plain paths to .md files. Anchors follow GitHub's rules (slug).
// testdata directories, node_modules and build are not read.
func TestDocLinks(t *testing.T) {
	problems, n := checkDocs(t, ".")
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("checked %d links and %d citations", n.links, n.citations)
	if n.links < 50 || n.citations < 80 {
		t.Errorf("checked %d links and %d citations: the scan found too few", n.links, n.citations)
	}
}

// TestDocLinksFixture: checkDocs reports each kind of dangling reference
// in testdata/doclinks, and nothing else there.
func TestDocLinksFixture(t *testing.T) {
	problems, _ := checkDocs(t, filepath.Join("testdata", "doclinks"))
	want := []string{
		`README.md:8: link docs/missing.md: no such file`,
		`README.md:9: link docs/guide.md#no-such-anchor: no heading or id "no-such-anchor" in docs/guide.md`,
		`README.md:10: link #nope: no heading or id "nope" in README.md`,
		`cite.go:4: citation docs/guide.md "Setup steps": in code, cite it as docs/guide.md#setup-steps`,
		`cite.go:6: citation README "Scaling": no such heading in README.md`,
		`cite.go:7: citation docs/guide.md#gone: no heading or id "gone" in docs/guide.md`,
		`cite.go:8: citation docs/gone.md: no such file`,
		`cite.go:9: citation docs/guide.md "Teardown": no such heading in docs/guide.md`,
		`docs/guide.md:9: link ../README.md#read-later: no heading or id "read-later" in README.md`,
	}
	if !slices.Equal(problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
}

// readmeExt is ".md" for a citation of the bare README, which code cites
// as README.md#anchor.
func readmeExt(what string) string {
	if strings.HasPrefix(what, `README "`) {
		return ".md"
	}
	return ""
}

// TestSlug pins GitHub's heading anchors (github-slugger): lower case,
// punctuation dropped except - and _, each space a -, markup gone.
func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"Pre-queue lottery":                                   "pre-queue-lottery",
		"`flashgate top`":                                     "flashgate-top",
		"Using `verifier` in an order service":                "using-verifier-in-an-order-service",
		"Browsers: visitor identity and the admission cookie": "browsers-visitor-identity-and-the-admission-cookie",
		"What a client sees, measured":                        "what-a-client-sees-measured",
		"Redis persistence, and what a loss can cost":         "redis-persistence-and-what-a-loss-can-cost",
		"A → B — c_d (x/y) 1.5":                               "a--b--c_d-xy-15",
		"See [the flow](#the-flow) **now**":                   "see-the-flow-now",
		"Ünïcode Straße":                                      "ünïcode-straße",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}

type docCounts struct{ links, citations int }

// docFile is one Markdown file: its anchors (heading slugs, with GitHub's
// -1, -2 … for repeats, and explicit id/name attributes).
type docFile struct {
	anchors map[string]bool
}

var (
	fence       = regexp.MustCompile("^\\s*(```|~~~)")
	heading     = regexp.MustCompile(`^(#{1,6})\s+(.*?)(?:\s+#+)?\s*$`)
	codeSpan    = regexp.MustCompile("``[^`]*``|`[^`]*`")
	inlineLink  = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLink     = regexp.MustCompile(`^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$`)
	htmlRef     = regexp.MustCompile(`(?:href|src)="([^"]+)"`)
	htmlID      = regexp.MustCompile(`<a\s[^>]*(?:id|name)="([^"]+)"`)
	mdMarkup    = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)|<[^>]+>`)
	scheme      = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	readmeCite  = regexp.MustCompile(`\bREADME \\?"([^"\\\n]+)\\?"`)
	mdPathCite  = regexp.MustCompile(`(?:^|[^\w./-])((?:[\w.-]+/)*[\w.-]+\.md)(#[\w-]+)?(?: \\?"([^"\\\n]+)\\?")?`)
	citeSources = []string{".go", ".js", ".mjs", ".cjs", ".ts", ".sh", ".lua", ".yml", ".yaml", ".toml", ".html", ".tmpl", ".capnp", ".sql", ".md", "Makefile"}
)

// slug is GitHub's anchor of a heading: the rendered text (links and
// inline code reduced to their text, HTML tags dropped), lower case, every
// character but letters, digits, marks, -, _ and space dropped, each space
// a -.
func slug(h string) string {
	h = mdMarkup.ReplaceAllStringFunc(h, func(m string) string {
		if strings.HasPrefix(m, "<") {
			return ""
		}
		return mdMarkup.FindStringSubmatch(m)[1]
	})
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// mdLines is a Markdown file's lines, with fenced code blocks marked.
func mdLines(text string) (lines []string, inFence []bool) {
	open := ""
	for _, l := range strings.Split(text, "\n") {
		m := fence.FindStringSubmatch(l)
		switch {
		case open == "" && m != nil:
			open = m[1]
			inFence = append(inFence, true)
		case open != "" && m != nil && m[1] == open:
			open = ""
			inFence = append(inFence, true)
		default:
			inFence = append(inFence, open != "")
		}
		lines = append(lines, l)
	}
	return lines, inFence
}

func parseDoc(text string) *docFile {
	d := &docFile{anchors: map[string]bool{}}
	count := map[string]int{}
	lines, inFence := mdLines(text)
	for i, l := range lines {
		if inFence[i] {
			continue
		}
		for _, m := range htmlID.FindAllStringSubmatch(l, -1) {
			d.anchors[m[1]] = true
		}
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		base := slug(m[2])
		s := base
		for n := count[base]; ; n++ {
			if n > 0 {
				s = fmt.Sprintf("%s-%d", base, n)
			}
			if !d.anchors[s] {
				count[base] = n + 1
				break
			}
		}
		d.anchors[s] = true
	}
	return d
}

// checkDocs walks root and returns every dangling link and citation as
// "file:line: …" (file relative to root, sorted by file and line), and how
// many it checked.
func checkDocs(t *testing.T, root string) ([]string, docCounts) {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := e.Name()
		if e.IsDir() {
			if p != root && (name == "testdata" || name == "node_modules" || name == "build" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if p == filepath.Join(root, "docs_test.go") {
			return nil // this checker: its comments and patterns show the forms, they cite nothing
		}
		for _, ext := range citeSources {
			if strings.HasSuffix(name, ext) {
				rel, err := filepath.Rel(root, p)
				if err != nil {
					return err
				}
				files = append(files, filepath.ToSlash(rel))
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)

	docs := map[string]*docFile{} // by path relative to root; nil: not a file
	doc := func(rel string) (*docFile, bool) {
		if d, ok := docs[rel]; ok {
			return d, d != nil
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			docs[rel] = nil
			return nil, false
		}
		docs[rel] = parseDoc(string(data))
		return docs[rel], true
	}
	exists := func(rel string) bool {
		_, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
		return err == nil
	}
	// inside: rel is a path under root (links above it go to GitHub pages we cannot check).
	inside := func(rel string) bool { return rel != ".." && !strings.HasPrefix(rel, "../") }

	var problems []string
	var n docCounts
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		dir := path.Dir(f)
		report := func(line int, format string, a ...any) {
			problems = append(problems, fmt.Sprintf("%s:%d: %s", f, line, fmt.Sprintf(format, a...)))
		}
		// anchor checks #a in the Markdown file rel.
		anchor := func(line int, what, rel, a string) {
			if d, ok := doc(rel); ok && !d.anchors[a] {
				report(line, "%s: no heading or id %q in %s", what, a, rel)
			}
		}

		if strings.HasSuffix(f, ".md") {
			lines, inFence := mdLines(string(data))
			for i, l := range lines {
				if inFence[i] {
					continue
				}
				prose := codeSpan.ReplaceAllString(l, "")
				var targets []string
				for _, re := range []*regexp.Regexp{inlineLink, refLink, htmlRef} {
					for _, m := range re.FindAllStringSubmatch(prose, -1) {
						targets = append(targets, m[1])
					}
				}
				for _, target := range targets {
					if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
						continue
					}
					n.links++
					p, frag, _ := strings.Cut(target, "#")
					if up, err := url.PathUnescape(p); err == nil {
						p = up
					}
					rel := f
					switch {
					case strings.HasPrefix(p, "/"):
						rel = path.Clean(strings.TrimPrefix(p, "/"))
					case p != "":
						rel = path.Join(dir, p)
					}
					if !inside(rel) {
						continue
					}
					if !exists(rel) {
						report(i+1, "link %s: no such file", target)
						continue
					}
					if frag != "" && strings.HasSuffix(rel, ".md") {
						anchor(i+1, "link "+target, rel, frag)
					}
				}
			}
		}

		// Citations: README "Section", path.md, path.md#anchor, path.md "Section".
		// A path is relative to the citing file's directory or to root;
		// README is the root's or the citing directory's own.
		lines := strings.Split(string(data), "\n")
		if strings.HasSuffix(f, ".md") {
			// Links were checked above; code blocks show commands and output, not citations.
			var inFence []bool
			lines, inFence = mdLines(string(data))
			for i := range lines {
				if inFence[i] {
					lines[i] = ""
				}
				for _, re := range []*regexp.Regexp{inlineLink, refLink, htmlRef} {
					lines[i] = re.ReplaceAllString(lines[i], "")
				}
			}
		}
		for i, l := range lines {
			cite := func(what string, candidates []string, frag, section string) {
				n.citations++
				var found []string
				for _, c := range candidates {
					if inside(c) && exists(c) {
						found = append(found, c)
					}
				}
				if len(found) == 0 {
					report(i+1, "citation %s: no such file", what)
					return
				}
				if frag == "" && section == "" {
					return
				}
				for _, c := range found {
					d, ok := doc(c)
					if !ok {
						return // not a Markdown file we can read: nothing to check
					}
					if frag != "" && d.anchors[frag] {
						return
					}
					if section != "" && d.anchors[slug(section)] {
						if !strings.HasSuffix(f, ".md") {
							// Code cites the anchor (issue 25 §3), which editors follow;
							// prose may name the section.
							report(i+1, "citation %s: in code, cite it as %s#%s", what, strings.TrimSuffix(strings.SplitN(what, ` "`, 2)[0], " ")+readmeExt(what), slug(section))
						}
						return
					}
				}
				if frag != "" {
					report(i+1, "citation %s: no heading or id %q in %s", what, frag, found[0])
				} else {
					report(i+1, "citation %s: no such heading in %s", what, found[0])
				}
			}
			for _, m := range readmeCite.FindAllStringSubmatch(l, -1) {
				cands := []string{"README.md"}
				if dir != "." {
					cands = append(cands, path.Join(dir, "README.md"))
				}
				cite(`README "`+m[1]+`"`, cands, "", m[1])
			}
			for _, m := range mdPathCite.FindAllStringSubmatch(l, -1) {
				p, frag, section := m[1], strings.TrimPrefix(m[2], "#"), m[3]
				if !strings.Contains(p, "/") && frag == "" && section == "" {
					continue // a bare file name (a string in code, "README.md"): too loose to resolve
				}
				what := p + m[2]
				if section != "" {
					what += ` "` + section + `"`
				}
				cands := []string{path.Join(dir, p)}
				if !strings.HasPrefix(p, ".") && dir != "." {
					cands = append(cands, path.Clean(p))
				}
				cite(what, cands, frag, section)
			}
		}
	}
	return problems, n
}

// absoluteInstant matches an instant written out in a command: an RFC 3339
// date-time or a Unix time in ms (13 digits) or s (10 digits from 2020 on).
var absoluteInstant = regexp.MustCompile(`\b20\d\d-\d\d-\d\dT\d\d:\d\d|\b1[6-9]\d{11}\b|\b1[6-9]\d{8}\b`)

// TestNoTimeBombsInRunnableExamples: no command of a ```sh block of the
// Markdown files (README, docs/, examples/) writes an absolute instant. An
// example that opens a room "at 09:00 on a date" works until that date
// passes and then answers 403 room_closed (TestREADMECurlCommands failed
// that way once): a document computes instants relative to now
// (`$(date -u -d '+1 hour' …)`). Comments (# …), which show answers, may hold
// instants. testdata/timebombs.md holds one of each kind, which it must find.
func TestNoTimeBombsInRunnableExamples(t *testing.T) {
	if got := timeBombs(t, filepath.Join("testdata", "timebombs")); len(got) != 3 {
		t.Fatalf("the fixture's three bombs were not all found: %q", got)
	}
	for _, b := range timeBombs(t, ".") {
		t.Error(b)
	}
}

// timeBombs lists file:line of every command line of a ```sh block under
// root that holds an absolute instant.
func timeBombs(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || name == "node_modules" || name == "build" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".md") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		in := false
		for i, l := range strings.Split(string(data), "\n") {
			switch {
			case strings.HasPrefix(l, "```sh") || strings.HasPrefix(l, "```bash"):
				in = true
				continue
			case strings.HasPrefix(l, "```"):
				in = false
				continue
			}
			code := strings.TrimSpace(l)
			if k := strings.Index(code, " # "); k >= 0 {
				code = code[:k]
			}
			if in && !strings.HasPrefix(code, "#") && absoluteInstant.MatchString(code) {
				out = append(out, fmt.Sprintf("%s:%d: an absolute instant in a runnable example: %s", p, i+1, absoluteInstant.FindString(code)))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
