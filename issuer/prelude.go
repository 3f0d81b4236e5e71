package issuer

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// The prelude (lua/prelude.lua) is a library of top-level definitions the
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

// assemble returns body preceded by the prelude pieces it needs: those
// defining a name body mentions, and, transitively, those those pieces
// mention, in the prelude's order (so forward declarations stay ahead of
// their definitions).
func assemble(pieces []preludePiece, body string) string {
	need := needed(pieces, body)
	var b strings.Builder
	for i, p := range pieces {
		if need[i] {
			b.WriteString(p.src)
		}
	}
	b.WriteString("\n")
	b.WriteString(body)
	return b.String()
}

// needed tells, by index, the pieces body needs (assemble).
func needed(pieces []preludePiece, body string) []bool {
	need := make([]bool, len(pieces))
	definers := map[string][]int{}
	for i, p := range pieces {
		for _, n := range p.defines {
			definers[n] = append(definers[n], i)
		}
	}
	var visit func(src string)
	visit = func(src string) {
		for id := range luaIdents(src) {
			for _, i := range definers[id] {
				if !need[i] {
					need[i] = true
					visit(pieces[i].src)
				}
			}
		}
	}
	visit(body)
	return need
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

// assembleKeys is assemble for a script that takes only the room keys it
// uses instead of all of them (Redis turns every key of an EVALSHA into a
// Lua string on every call, ≈ 0.1 µs each): the key bindings it needs become
// one line binding those names to KEYS[1], KEYS[2]… in the room's key order,
// and keys returns their indices in roomKeys (from 0), the KEYS to pass.
// It panics if body or a piece it needs names KEYS other than through a
// binding (such a script takes every key: assemble).
func assembleKeys(pieces []preludePiece, body string) (src string, keys []int) {
	need := needed(pieces, body)
	used := luaIdents(body)
	var b strings.Builder
	bound := map[string]int{}
	for i, p := range pieces {
		if !need[i] {
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
	return head + b.String() + "\n" + body, keys
}
