package server

import (
	"encoding/json"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/text/feature/plural"
	"golang.org/x/text/language"

	"github.com/flashgate/flashgate/issuer"
)

// shippedLanguages are the languages the page must ship (issue 35 §1).
var shippedLanguages = []string{"en", "ko", "ja", "zh-Hans", "zh-Hant", "de", "fr", "es", "it", "pt-BR", "nl", "pl", "tr",
	"ru", "uk", "ar", "he", "id", "th", "vi", "hi"}

// rawCatalogs are the built-in catalogs as written (before English fills gaps).
func rawCatalogs(t *testing.T) map[string]map[string]string {
	t.Helper()
	files, err := fs.Glob(localeFS, "page/locales/*.json")
	require.NoError(t, err)
	out := map[string]map[string]string{}
	for _, f := range files {
		b, err := localeFS.ReadFile(f)
		require.NoError(t, err)
		var m map[string]string
		require.NoError(t, json.Unmarshal(b, &m), f)
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = m
	}
	return out
}

// TestPageCatalogsComplete: every built-in catalog translates every
// message of the English one — each plural message in every CLDR category
// its language uses for 0 … 1000 — with the same placeholders, nothing
// copied from English, and no key English lacks.
func TestPageCatalogsComplete(t *testing.T) {
	raw := rawCatalogs(t)
	for _, l := range shippedLanguages {
		require.Contains(t, raw, l, "the %s catalog", l)
	}
	en := raw["en"]
	base := func(k string) (string, bool) { // "eta.minutes_one" → "eta.minutes"
		if i := strings.LastIndexByte(k, '_'); i > 0 {
			if _, ok := en[k[:i]+"_other"]; ok {
				return k[:i], true
			}
		}
		return k, false
	}
	names := func(s string) []string {
		var out []string
		for _, m := range placeholder.FindAllStringSubmatch(s, -1) {
			out = append(out, m[1])
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	for lang, m := range raw {
		tag := language.MustParse(lang)
		for k, v := range m {
			b, isPlural := base(k)
			if !isPlural {
				_, ok := en[k]
				assert.True(t, ok, "%s: %q is no key of en.json", lang, k)
				assert.Equal(t, names(en[k]), names(v), "%s: %q has other placeholders than English", lang, k)
			} else {
				for _, n := range names(v) {
					assert.Contains(t, names(en[b+"_other"]), n, "%s: %q", lang, k)
				}
			}
			if lang != "en" && !strings.HasPrefix(lang, "en-") {
				assert.NotEqual(t, en[k], v, "%s: %q is English", lang, k)
			}
		}
		for k := range en {
			b, isPlural := base(k)
			if !isPlural {
				assert.Contains(t, m, k, "%s lacks %q", lang, k)
				continue
			}
			assert.Contains(t, m, b+"_other", "%s lacks %q", lang, b+"_other")
			for n := range 1001 {
				form := pluralForms[plural.Cardinal.MatchPlural(tag, n, 0, 0, 0, 0)]
				if _, ok := m[b+"_"+form]; !ok {
					t.Errorf("%s lacks %s_%s (for %d)", lang, b, form, n)
					break
				}
			}
		}
	}
}

// TestPageNegotiation: the page's language comes from ?lang=, then
// Accept-Language (RFC 4647 matching), then the room's default; the room's
// list bounds it; Content-Language names it and Vary covers
// Accept-Language.
func TestPageNegotiation(t *testing.T) {
	e := pageEnv(t)
	open := e.room(issuer.RoomConfig{Capacity: 100})
	ko := e.room(issuer.RoomConfig{Capacity: 100, PageLanguage: "ko"})
	few := e.room(issuer.RoomConfig{Capacity: 100, PageLanguage: "ja", PageLanguages: []string{"ja", "en", "ar"}})
	for _, c := range []struct {
		room, query, accept, want string
	}{
		{open, "", "", "en"},
		{open, "", "de-DE,de;q=0.9,en;q=0.5", "de"},
		{open, "", "ko-KR", "ko"},
		{open, "", "zh-TW", "zh-Hant"},
		{open, "", "zh-CN", "zh-Hans"},
		{open, "", "pt", "pt-BR"},
		{open, "", "xx-YY", "en"},
		{open, "", "fr;q=0.9, ko;q=0.5", "fr"},
		{open, "?lang=ar", "de-DE", "ar"},
		{open, "?lang=nonsense", "de-DE", "de"},
		{ko, "", "", "ko"},
		{ko, "", "xx", "ko"},
		{ko, "", "th-TH", "th"},
		{few, "", "de-DE", "ja"},
		{few, "", "ar-EG", "ar"},
		{few, "?lang=de", "en-US", "en"},
	} {
		r := e.do(req{method: "GET", path: "/wait/" + c.room + c.query, hdr: map[string]string{"Accept-Language": c.accept}})
		require.Equal(t, 200, r.status, "%s", r.body)
		assert.Equal(t, c.want, r.header.Get("Content-Language"), "%s %q", c.query, c.accept)
		assert.Contains(t, r.header.Get("Vary"), "Accept-Language")
		assert.Contains(t, string(r.body), `<html lang="`+c.want+`"`)
	}
	r := e.do(req{method: "GET", path: "/wait/" + open + "?lang=he"})
	assert.Contains(t, string(r.body), `<html lang="he" dir="rtl">`)
	assert.Contains(t, string(r.body), `<option value="he" lang="he" selected>עברית</option>`)
	// The room's list is the switcher's.
	r = e.do(req{method: "GET", path: "/wait/" + few})
	assert.Equal(t, 3, strings.Count(string(r.body), "<option "), "%s", r.body)
}

// keyLike is a catalog key left in a page's text.
var keyLike = regexp.MustCompile(`\b(?:state|place|eta|live|lottery|noscript|alert|done|language|page|opens|continue|invite|exchange)\.[a-zA-Z.]+\b`)

// pageText is what a page shows: the body without the embedded catalog.
func pageText(body []byte) string {
	return regexp.MustCompile(`(?s)<(script|style)[^>]*>.*?</(?:script|style)>`).ReplaceAllString(string(body), "")
}

// TestPageEveryStateEveryLanguage: the preview of every state renders in
// every language with no catalog key and no placeholder left.
func TestPageEveryStateEveryLanguage(t *testing.T) {
	e := pageEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 100})
	for _, lang := range e.srv.langs.names {
		for _, state := range PreviewStates {
			r := e.admin("GET", "/admin/rooms/"+room+"/preview?state="+state+"&lang="+lang, "")
			require.Equal(t, 200, r.status, "%s %s: %s", lang, state, r.body)
			assertPageHeaders(t, r)
			assert.Equal(t, lang, r.header.Get("Content-Language"))
			text := pageText(r.body)
			assert.NotRegexp(t, keyLike, text, "%s %s", lang, state)
			assert.NotContains(t, text, "{{", "%s %s", lang, state)
		}
	}
	// Numbers as wait.js writes them (Intl.NumberFormat: Latin digits in Arabic).
	r := e.admin("GET", "/admin/rooms/"+room+"/preview?state=waiting&lang=ar", "")
	assert.Contains(t, string(r.body), `<dd id="position">42</dd>`)
	r = e.admin("GET", "/admin/rooms/"+room+"/preview?state=nonsense", "")
	assert.Equal(t, 400, r.status)
	r = e.do(req{method: "GET", path: "/admin/rooms/" + room + "/preview"})
	assert.Equal(t, 401, r.status)
}

// pseudo is the pseudo-locale of s: every message wrapped in ⟦ ⟧ with its
// letters accented (placeholders kept), so that any text of a page not
// wrapped so did not come from the catalog.
func pseudo(s string) string {
	acc := map[rune]rune{'a': 'á', 'e': 'é', 'i': 'í', 'o': 'ó', 'u': 'ú', 'A': 'Å', 'E': 'É', 'O': 'Ö', 'n': 'ñ', 'c': 'ç'}
	var b strings.Builder
	b.WriteString("⟦")
	last := 0
	for _, m := range placeholder.FindAllStringIndex(s, -1) {
		for _, r := range s[last:m[0]] {
			b.WriteRune(cmp(acc[r], r))
		}
		b.WriteString(s[m[0]:m[1]])
		last = m[1]
	}
	for _, r := range s[last:] {
		b.WriteRune(cmp(acc[r], r))
	}
	b.WriteString("⟧")
	return b.String()
}

func cmp(a, b rune) rune {
	if a != 0 {
		return a
	}
	return b
}

// WritePseudoLocale writes en-XA.json, the pseudo-locale of en.json, into
// dir (for Options.PageLocaleDir).
func writePseudoLocale(t *testing.T, dir string) {
	t.Helper()
	raw := rawCatalogs(t)["en"]
	m := maps.Clone(raw)
	for k, v := range m {
		m[k] = pseudo(v)
	}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "en-XA.json"), b, 0o600))
}

// TestPagePseudoLocale: with the pseudo-locale en-XA added through
// Options.PageLocaleDir, every text of every state's page (text nodes,
// titles, labels) comes from the catalog: a hard-coded string shows up
// unwrapped. Data (numbers, the room, times, the commitment) is allowed.
func TestPagePseudoLocale(t *testing.T) {
	dir := t.TempDir()
	writePseudoLocale(t, dir)
	e := newEnv(t, visitorMode(), withOptions(func(o *Options) { o.PageLocaleDir = dir }))
	room := e.room(issuer.RoomConfig{Capacity: 100})
	data := regexp.MustCompile(`^[\s\d.,:·–\-()]*$|^` + regexp.QuoteMeta(room) + `$|^[0-9a-f]{64}$|^\d{4}-\d\d-\d\d \d\d:\d\d UTC$`)
	wrapped := regexp.MustCompile(`(?s)⟦[^⟦⟧]*⟧`)
	for _, state := range PreviewStates {
		r := e.admin("GET", "/admin/rooms/"+room+"/preview?state="+state+"&lang=en-XA", "")
		require.Equal(t, 200, r.status, "%s: %s", state, r.body)
		require.Equal(t, "en-XA", r.header.Get("Content-Language"))
		// The switcher's options are each language's own name (data).
		body := regexp.MustCompile(`(?s)<select.*?</select>`).ReplaceAllString(pageText(r.body), "")
		var texts []string
		for _, m := range regexp.MustCompile(`(?s)>([^<]*)<`).FindAllStringSubmatch(body, -1) {
			texts = append(texts, m[1])
		}
		for _, m := range regexp.MustCompile(`(?:aria-label|title|alt|placeholder)="([^"]*)"`).FindAllStringSubmatch(body, -1) {
			texts = append(texts, m[1])
		}
		for _, s := range texts {
			rest := strings.TrimSpace(wrapped.ReplaceAllString(s, ""))
			for _, part := range strings.Fields(strings.ReplaceAll(rest, "·", " ")) {
				assert.Regexp(t, data, part, "%s: hard-coded text %q in %q", state, part, s)
			}
		}
	}
}

// TestPageMessageLinks: page_message's Markdown links become links (http,
// https, mailto), anything else stays text.
func TestPageMessageLinks(t *testing.T) {
	for in, want := range map[string]string{
		"One per customer. [Size guide](https://shop.example/sizes?a=1&b=2)": `One per customer. <a href="https://shop.example/sizes?a=1&amp;b=2" rel="noopener">Size guide</a>`,
		"[mail](mailto:help@shop.example)\nline two":                         `<a href="mailto:help@shop.example" rel="noopener">mail</a><br>line two`,
		"[x](javascript:alert(1)) <b>bold</b>":                               `[x](javascript:alert(1)) &lt;b&gt;bold&lt;/b&gt;`,
		`[a"b](https://e.example/"onmouseover=x)`:                            `[a&#34;b](https://e.example/&#34;onmouseover=x)`,
		"[<img src=x>](https://e.example/)":                                  `<a href="https://e.example/" rel="noopener">&lt;img src=x&gt;</a>`,
	} {
		assert.Equal(t, want, string(messageHTML(in)), in)
	}
}

// TestPageNoScriptSaysWhatItDoes: without JavaScript, a page that
// refreshes says how often; one that does not (sold out, ended) says
// nothing about refreshing; the sold-out page links back to the shop.
func TestPageNoScriptSaysWhatItDoes(t *testing.T) {
	e := pageEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 1, PageDoneURL: "https://shop.example/", PageDoneText: "Zurück zum Laden"})
	e.page(room, "", "") // the only place
	r := e.page(room, "", "")
	assert.Regexp(t, `<noscript><p class="note">This page reloads every (?:second|\d+ seconds) to show your place\.</p></noscript>`, string(r.body), "%s", regexp.MustCompile(`(?s)<noscript>.*?</noscript>`).FindAllString(string(r.body), -1))
	for _, state := range []string{"soldout", "saleended", "ended", "admitted"} {
		r = e.admin("GET", "/admin/rooms/"+room+"/preview?state="+state, "")
		assert.NotContains(t, pageText(r.body), "reloads", state) // the catalog for wait.js left out
		assert.NotContains(t, pageText(r.body), "refreshes", state)
	}
	r = e.admin("GET", "/admin/rooms/"+room+"/preview?state=soldout", "")
	assert.Contains(t, string(r.body), `<p class="only-final" id="done"><a href="https://shop.example/" dir="auto">Zurück zum Laden</a></p>`)
}
