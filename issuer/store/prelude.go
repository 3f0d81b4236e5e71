package store

import (
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/flashgate/flashgate/internal/roomkey"
)

// The prelude (lua/prelude*.lua, preludeFiles) is a library of top-level definitions the
// room scripts share. Redis runs a script's whole body on every EVALSHA, so
// every definition a script carries costs it a closure (or a table) per
// call whether it uses it or not: the whole prelude cost ≈ 5–10 µs per call.
// assemble gives each script only the pieces it uses, found at init.

// preludePiece is one top-level definition of the prelude with the
// comment block above it: the names it defines and its source.
type preludePiece struct {
	defines []string
	src     string
}

var (
	// A top-level definition starts at column 0: "local function f(",
	// "local a, b = …", "local f -- forward declaration" or "f = function(".
	reLocalFunc = regexp.MustCompile(`^local function ([A-Za-z_][A-Za-z0-9_]*)`)
	reLocalVars = regexp.MustCompile(`^local ([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)`)
	reAssignFn  = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*) = function`)
	reIdent     = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	// reLuaNoise matches what is not code for the dependency scan: long
	// strings and comments, comments, quoted strings.
	reLuaNoise = regexp.MustCompile(`--\[\[(?s:.*?)\]\]|--[^\n]*|'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"`)
)

// splitPrelude cuts the prelude into its top-level definitions. The lines
// before the first one (the header comment) belong to no piece.
func splitPrelude(src string) []preludePiece {
	var pieces []preludePiece
	var pending []string // comment lines waiting for the definition below them
	cur := -1
	for _, line := range strings.SplitAfter(src, "\n") {
		if names := definedBy(line); names != nil {
			pieces = append(pieces, preludePiece{defines: names, src: strings.Join(pending, "") + line})
			pending, cur = nil, len(pieces)-1
			continue
		}
		if strings.HasPrefix(line, "--") || strings.TrimSpace(line) == "" {
			pending = append(pending, line)
			continue
		}
		if cur >= 0 { // the body of the current definition
			pieces[cur].src += strings.Join(pending, "") + line
		}
		pending = nil
	}
	return pieces
}

// definedBy returns the names a line starting a top-level definition
// defines, or nil for any other line.
func definedBy(line string) []string {
	if m := reLocalFunc.FindStringSubmatch(line); m != nil {
		return []string{m[1]}
	}
	if m := reAssignFn.FindStringSubmatch(line); m != nil {
		return []string{m[1]}
	}
	if m := reLocalVars.FindStringSubmatch(line); m != nil {
		var names []string
		for _, n := range strings.Split(m[1], ",") {
			names = append(names, strings.TrimSpace(n))
		}
		return names
	}
	return nil
}

// luaIdents returns the identifiers src's code mentions (comments and
// string literals left out).
func luaIdents(src string) map[string]bool {
	ids := map[string]bool{}
	for _, id := range reIdent.FindAllString(reLuaNoise.ReplaceAllString(src, " "), -1) {
		ids[id] = true
	}
	return ids
}

// Cold pieces. A closure costs a script ≈ 1.2k Redis instructions (≈ 0.2
// µs) per call whether it runs or not, so what a script's usual path never
// calls (creating a room, repacking its config, drawing the lottery…) is
// called as cold().name: a piece hot code names only that way is cold, and
// assemble defines it inside the loader cold, which creates the cold pieces'
// closures on its first call and returns them by name (one closure per call
// for all of them, until one is needed). Hot code is the body and the pieces
// it names plainly (transitively); a cold piece may name hot ones plainly.

// reColdRef matches a call of a cold piece through the loader: cold().name.
var reColdRef = regexp.MustCompile(`\bcold\(\)\.([A-Za-z_][A-Za-z0-9_]*)`)

// coldRefs returns the names src's code calls as cold().name, and src's code
// without those references (for the plain-reference scan).
func coldRefs(src string) (names []string, rest string) {
	code := reLuaNoise.ReplaceAllString(src, " ")
	for _, m := range reColdRef.FindAllStringSubmatch(code, -1) {
		names = append(names, m[1])
	}
	return names, reColdRef.ReplaceAllString(code, " ")
}

// assemble returns body preceded by the prelude pieces it needs (needed),
// in the prelude's order (so forward declarations stay ahead of their
// definitions), the cold ones inside the loader.
func assemble(pieces []preludePiece, body string) string {
	a := needed(pieces, body)
	var b strings.Builder
	if luaIdents(body)["ROOM_KEYS"] {
		b.WriteString("local ROOM_KEYS = " + strconv.Itoa(len(roomkey.All(""))) + "\n")
	}
	b.WriteString(a.coldHead())
	for i, p := range pieces {
		if a.hot[i] {
			b.WriteString(p.src)
		}
	}
	b.WriteString(a.loader(pieces))
	b.WriteString("\n")
	b.WriteString(body)
	return trimConfig(b.String())
}

// reConfigTable matches load_config's table of the room's config, one
// field a line; reConfigField one of its lines, reFieldUse a field named
// in code (".name").
var (
	reConfigTable = regexp.MustCompile(`(?m)^  local cfg = \{\n(?:    [a-z_]+ = [^\n]*,\n)+  \}\n`)
	reConfigField = regexp.MustCompile(`(?m)^    ([a-z_]+) = [^\n]*,\n`)
	reFieldUse    = regexp.MustCompile(`\.([A-Za-z_][A-Za-z0-9_]*)`)
)

// trimConfig drops from src's load_config table the fields src's code
// never names as .field (on any table: a reading under another name than
// cfg keeps its field too), so a script sets only the fields it reads.
func trimConfig(src string) string {
	used := map[string]bool{}
	for _, m := range reFieldUse.FindAllStringSubmatch(reLuaNoise.ReplaceAllString(src, " "), -1) {
		used[m[1]] = true
	}
	return reConfigTable.ReplaceAllStringFunc(src, func(table string) string {
		return reConfigField.ReplaceAllStringFunc(table, func(line string) string {
			if used[reConfigField.FindStringSubmatch(line)[1]] {
				return line
			}
			return ""
		})
	})
}

// assembly is what needed found: by index, the pieces a script defines at
// its top level (hot) and inside the loader (cold), and the names its code
// calls through the loader (exports).
type assembly struct {
	hot, cold []bool
	exports   []string
}

// coldHead declares the loader and its table, ahead of the hot pieces that
// call it ("" when nothing calls it).
func (a assembly) coldHead() string {
	if len(a.exports) == 0 {
		return ""
	}
	return "local cold, COLD -- the loader of the cold pieces and its table (issuer/store/prelude.go)\n"
}

// loader returns the definition of cold: the cold pieces, defined on its
// first call, and the table of the exported names ("" when nothing calls it).
func (a assembly) loader(pieces []preludePiece) string {
	if len(a.exports) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("cold = function()\nif COLD then return COLD end\n")
	for i, p := range pieces {
		if a.cold[i] {
			b.WriteString(p.src)
		}
	}
	b.WriteString("COLD = {")
	for i, n := range a.exports {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(n + " = " + n)
	}
	b.WriteString("}\nreturn COLD\nend\n")
	return b.String()
}

// needed finds the pieces body needs: hot, those its code names plainly
// and, transitively, those those name plainly; cold, those hot code calls as
// cold().name and what they name that is not hot. It panics on a
// cold().name that no piece defines.
func needed(pieces []preludePiece, body string) assembly {
	a := assembly{hot: make([]bool, len(pieces)), cold: make([]bool, len(pieces))}
	definers := map[string][]int{}
	for i, p := range pieces {
		for _, n := range p.defines {
			definers[n] = append(definers[n], i)
		}
	}
	exported := map[string]bool{}
	var roots []string
	scan := func(src string) map[string]bool {
		refs, rest := coldRefs(src)
		for _, n := range refs {
			if !exported[n] {
				if definers[n] == nil {
					panic("assemble: cold()." + n + " names no prelude definition")
				}
				exported[n] = true
				a.exports = append(a.exports, n)
				roots = append(roots, n)
			}
		}
		return luaIdents(rest)
	}
	var visit func(src string, mark []bool)
	visit = func(src string, mark []bool) {
		for id := range scan(src) {
			for _, i := range definers[id] {
				m := mark
				if keyBinding(pieces[i]) != nil {
					m = a.hot // a key binding stays at the top (assembleKeys binds it)
				}
				if !a.hot[i] && !m[i] {
					m[i] = true
					visit(pieces[i].src, mark)
				}
			}
		}
	}
	visit(body, a.hot)
	// The cold roots, and what they name: cold unless hot. (Hot is final
	// here: only hot code's plain references make a piece hot.)
	for len(roots) > 0 {
		n := roots[0]
		roots = roots[1:]
		for _, i := range definers[n] {
			if !a.hot[i] && !a.cold[i] {
				a.cold[i] = true
				visit(pieces[i].src, a.cold)
			}
		}
	}
	sort.Strings(a.exports)
	return a
}

// reKeyBinding matches the code of a prelude piece binding room keys to
// names: "local K_A, K_B = KEYS[1], KEYS[2]".
var reKeyBinding = regexp.MustCompile(`^local (K_\w+(?:, K_\w+)*) = (KEYS\[\d+\](?:, KEYS\[\d+\])*)$`)

// keyBinding returns the names and the KEYS indices (from 1) a key binding
// piece binds, or nil for any other piece.
func keyBinding(p preludePiece) map[string]int {
	code := strings.TrimSpace(reLuaNoise.ReplaceAllString(p.src, ""))
	m := reKeyBinding.FindStringSubmatch(code)
	if m == nil {
		return nil
	}
	names, idx := strings.Split(m[1], ", "), strings.Split(m[2], ", ")
	if len(names) != len(idx) {
		return nil
	}
	out := map[string]int{}
	for i, n := range names {
		k, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(idx[i], "KEYS["), "]"))
		out[n] = k
	}
	return out
}

// reScriptKey matches a script's own key, one it takes after the room's:
// KEYS[ROOM_KEYS + i] (ROOM_KEYS: how many room keys it takes, defined by
// assemble and assembleKeys).
var reScriptKey = regexp.MustCompile(`KEYS\[ROOM_KEYS\b`)

// assembleKeys is assemble for a script that takes only the room keys it
// uses instead of all of them (Redis turns every key of an EVALSHA into a
// Lua string on every call, ≈ 0.1 µs each): the key bindings it needs become
// one line binding those names to KEYS[1], KEYS[2]… in the room's key order,
// and keys returns their indices in roomKeys (from 0), the KEYS to pass.
// The script's own keys, if any, follow them: KEYS[ROOM_KEYS + i]. It
// panics if body or a piece it needs names KEYS otherwise (such a script
// takes every key: assemble).
func assembleKeys(pieces []preludePiece, body string) (src string, keys []int) {
	a := needed(pieces, body)
	used := luaIdents(reScriptKey.ReplaceAllString(body, " ROOM_KEYS "))
	var b strings.Builder
	bound := map[string]int{}
	for i, p := range pieces {
		if a.cold[i] {
			for id := range luaIdents(p.src) {
				used[id] = true
			}
			continue
		}
		if !a.hot[i] {
			continue
		}
		if kb := keyBinding(p); kb != nil {
			for n, k := range kb {
				bound[n] = k
			}
			continue
		}
		for id := range luaIdents(p.src) {
			used[id] = true
		}
		b.WriteString(p.src)
	}
	if used["KEYS"] {
		panic("assembleKeys: the script names KEYS: it takes every room key (assemble)")
	}
	var names []string
	for n, k := range bound {
		if used[n] {
			names = append(names, n)
			keys = append(keys, k-1)
		}
	}
	sort.Slice(names, func(i, j int) bool { return bound[names[i]] < bound[names[j]] })
	sort.Ints(keys)
	refs := make([]string, len(names))
	for i := range names {
		refs[i] = "KEYS[" + strconv.Itoa(i+1) + "]"
	}
	head := ""
	if len(names) > 0 {
		head = "local " + strings.Join(names, ", ") + " = " + strings.Join(refs, ", ") + "\n"
	}
	if used["ROOM_KEYS"] {
		head += "local ROOM_KEYS = " + strconv.Itoa(len(names)) + "\n"
	}
	return trimConfig(head + a.coldHead() + b.String() + a.loader(pieces) + "\n" + body), keys
}
