package server

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"golang.org/x/text/feature/plural"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// The waiting page's words: one message catalog per language in
// page/locales/{tag}.json, in the i18next JSON v4 format (a flat object of
// key → text; "{{name}}" interpolates; a plural message is a set of keys
// key_zero, key_one, key_two, key_few, key_many, key_other chosen by the
// CLDR cardinal plural rules of the language, with the number in
// {{count}}). The server renders the page with the negotiated catalog and
// embeds that catalog in the page (<script type="application/json"
// id="fg-text">), so wait.js says the same words (plural rules from
// Intl.PluralRules, also CLDR). Options.PageLocaleDir adds or overrides
// catalogs at startup without a rebuild.

//go:embed page/locales/*.json
var localeFS embed.FS

// DefaultPageLanguage is the page's language when neither the room nor
// Options.PageLanguage names one.
const DefaultPageLanguage = "en"

// pluralForms are the CLDR plural categories by plural.Form.
var pluralForms = map[plural.Form]string{plural.Other: "other", plural.Zero: "zero", plural.One: "one",
	plural.Two: "two", plural.Few: "few", plural.Many: "many"}

// catalog is one language's messages.
type catalog struct {
	tag  language.Tag
	name string // the BCP 47 tag as served (Content-Language, <html lang>)
	dir  string // "ltr" or "rtl"
	msgs map[string]string
	json []byte // msgs as JSON, for the page
	p    *message.Printer
}

// rtl are the base languages written right to left.
var rtl = map[string]bool{"ar": true, "he": true, "fa": true, "ur": true, "ps": true, "yi": true, "dv": true, "ckb": true}

// latnDigits are the base languages whose numbers the page writes in
// Latin digits although x/text's CLDR data (older than CLDR 42) defaults
// them to native digits: browsers' Intl.NumberFormat (current CLDR) writes
// Latin digits for "ar", and the server must say what wait.js says.
var latnDigits = map[string]bool{"ar": true}

// placeholder matches an interpolation, {{name}}.
var placeholder = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)

// catalogs are the page's languages.
type catalogs struct {
	byName   map[string]*catalog // by lower-case tag
	names    []string            // sorted
	fallback string              // Options.PageLanguage
	mu       sync.Mutex
	matchers map[string]*langSet // "default|allowed,…" → its set (bounded: rooms' settings are few)
}

// langSet is one room's languages: the catalogs in matcher order (the
// default first) and their matcher.
type langSet struct {
	cats []*catalog
	m    language.Matcher
}

// loadCatalogs reads the built-in catalogs and dir's *.json over them (a
// file for a new language adds it, one for a built-in language overrides
// its keys), then fills every key a catalog lacks from English. fallback
// must name a loaded language.
func loadCatalogs(dir, fallback string) (*catalogs, error) {
	raw := map[string]map[string]string{}
	read := func(fsys fs.FS, where string) error {
		files, err := fs.Glob(fsys, "*.json")
		if err != nil {
			return err
		}
		for _, f := range files {
			b, err := fs.ReadFile(fsys, f)
			if err != nil {
				return err
			}
			var m map[string]string
			if err := json.Unmarshal(b, &m); err != nil {
				return fmt.Errorf("server: page catalog %s: %w", filepath.Join(where, f), err)
			}
			name := strings.TrimSuffix(f, ".json")
			tag, err := language.Parse(name)
			if err != nil {
				return fmt.Errorf("server: page catalog %s: the file name is no BCP 47 tag: %w", filepath.Join(where, f), err)
			}
			name = tag.String()
			if raw[strings.ToLower(name)] == nil {
				raw[strings.ToLower(name)] = map[string]string{}
			}
			maps.Copy(raw[strings.ToLower(name)], m)
		}
		return nil
	}
	sub, _ := fs.Sub(localeFS, "page/locales")
	if err := read(sub, "(built in)"); err != nil {
		return nil, err
	}
	if dir != "" {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("server: Options.PageLocaleDir: %w", err)
		}
		if err := read(os.DirFS(dir), dir); err != nil {
			return nil, err
		}
	}
	en := raw["en"]
	cs := &catalogs{byName: map[string]*catalog{}, matchers: map[string]*langSet{}}
	for lname, m := range raw {
		for k, v := range en {
			if _, ok := m[k]; !ok && !isPluralVariant(k, m) {
				m[k] = v
			}
		}
		for k, v := range m {
			if strings.TrimSpace(v) == "" {
				return nil, fmt.Errorf("server: page catalog %s: %q is empty", lname, k)
			}
		}
		tag := language.MustParse(lname)
		base, _ := tag.Base()
		b, _ := json.Marshal(m)
		ptag := tag
		if latnDigits[base.String()] {
			ptag, _ = language.Parse(tag.String() + "-u-nu-latn")
		}
		c := &catalog{tag: tag, name: tag.String(), dir: "ltr", msgs: m, json: b, p: message.NewPrinter(ptag)}
		if rtl[base.String()] {
			c.dir = "rtl"
		}
		cs.byName[lname] = c
		cs.names = append(cs.names, c.name)
	}
	sort.Strings(cs.names)
	if fallback == "" {
		fallback = DefaultPageLanguage
	}
	if cs.lookup(fallback) == nil {
		return nil, fmt.Errorf("server: Options.PageLanguage %q: no such catalog (have %s)", fallback, strings.Join(cs.names, ", "))
	}
	cs.fallback = cs.lookup(fallback).name
	return cs, nil
}

// isPluralVariant reports whether k is a plural key (k_other …) whose
// message m has in another category set: a language's plural categories
// differ from English's (Japanese has only "other").
func isPluralVariant(k string, m map[string]string) bool {
	i := strings.LastIndexByte(k, '_')
	if i < 0 {
		return false
	}
	if _, ok := m[k[:i]+"_other"]; ok {
		return true
	}
	return false
}

// lookup is the catalog of the tag name (any case), or nil.
func (cs *catalogs) lookup(name string) *catalog {
	if c, ok := cs.byName[strings.ToLower(name)]; ok {
		return c
	}
	if t, err := language.Parse(name); err == nil {
		return cs.byName[strings.ToLower(t.String())]
	}
	return nil
}

// set is the language set of a room: its allowed languages (all when
// empty) with its default (the deployment's when "" or not allowed) first.
func (cs *catalogs) set(def string, allowed []string) *langSet {
	key := def + "|" + strings.Join(allowed, ",")
	cs.mu.Lock()
	ls, ok := cs.matchers[key]
	cs.mu.Unlock()
	if ok {
		return ls
	}
	var cats []*catalog
	for _, n := range allowed {
		if c := cs.lookup(n); c != nil && !slices.Contains(cats, c) {
			cats = append(cats, c)
		}
	}
	if len(cats) == 0 {
		for _, n := range cs.names {
			cats = append(cats, cs.lookup(n))
		}
	}
	first := cs.lookup(def)
	if first == nil || !slices.Contains(cats, first) {
		first = cs.lookup(cs.fallback)
	}
	if !slices.Contains(cats, first) {
		first = cats[0]
	}
	ordered := []*catalog{first}
	for _, c := range cats {
		if c != first {
			ordered = append(ordered, c)
		}
	}
	tags := make([]language.Tag, len(ordered))
	for i, c := range ordered {
		tags[i] = c.tag
	}
	ls = &langSet{cats: ordered, m: language.NewMatcher(tags)}
	cs.mu.Lock()
	if len(cs.matchers) >= 1024 {
		clear(cs.matchers)
	}
	cs.matchers[key] = ls
	cs.mu.Unlock()
	return ls
}

// negotiate picks the page's catalog from ls: the ?lang= override when it
// names (or matches closely) an allowed language, else the best match of
// the Accept-Language header (RFC 4647 lookup through language.Matcher;
// the room's default when nothing matches).
func (ls *langSet) negotiate(override, accept string) *catalog {
	if override != "" {
		if t, err := language.Parse(override); err == nil {
			if _, i, conf := ls.m.Match(t); conf >= language.High {
				return ls.cats[i]
			}
		}
	}
	if accept == "" {
		return ls.cats[0]
	}
	tags, _, err := language.ParseAcceptLanguage(accept)
	if err != nil || len(tags) == 0 {
		return ls.cats[0]
	}
	_, i, conf := ls.m.Match(tags...)
	if conf == language.No {
		return ls.cats[0]
	}
	return ls.cats[i]
}

// text is the message key in c, interpolated: args are name, value pairs;
// a "count" makes key a plural message (key_one, key_other …). Numbers
// (int, int64) are formatted for the language. A key c lacks returns the
// key itself, so a missing message shows (and the tests find it).
func (c *catalog) text(key string, args ...any) string {
	vars := map[string]string{}
	k := key
	for i := 0; i+1 < len(args); i += 2 {
		name, _ := args[i].(string)
		switch v := args[i+1].(type) {
		case int:
			vars[name] = c.p.Sprintf("%d", v)
			if name == "count" {
				k = c.pluralKey(key, int64(v))
			}
		case int64:
			vars[name] = c.p.Sprintf("%d", v)
			if name == "count" {
				k = c.pluralKey(key, v)
			}
		default:
			vars[name] = fmt.Sprint(v)
		}
	}
	s, ok := c.msgs[k]
	if !ok {
		return key
	}
	return placeholder.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := vars[placeholder.FindStringSubmatch(m)[1]]; ok {
			return v
		}
		return m
	})
}

// pluralKey is key's variant for n in c's language ("key_one" …), falling
// back to key_other.
func (c *catalog) pluralKey(key string, n int64) string {
	if n < 0 {
		n = -n
	}
	i := int(min(n, 1_000_000_000))
	k := key + "_" + pluralForms[plural.Cardinal.MatchPlural(c.tag, i, 0, 0, 0, 0)]
	if _, ok := c.msgs[k]; ok {
		return k
	}
	return key + "_other"
}

// number formats n for c's language.
func (c *catalog) number(n int64) string { return c.p.Sprintf("%d", n) }
