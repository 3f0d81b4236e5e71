package store

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// roomScripts are the scripts assembled with the prelude, by name.
var roomScripts = []string{"enter", "status", "leave", "complete", "active", "revoke", "tick", "stats", "snapshot",
	"ban", "unban", "bans", "configure", "drain", "invite", "audit", "restore"}

// luaGlobals are the globals Redis's Lua gives a script.
var luaGlobals = map[string]bool{"redis": true, "tonumber": true, "tostring": true, "string": true, "math": true,
	"table": true, "unpack": true, "ipairs": true, "pairs": true, "error": true, "type": true, "cjson": true,
	"cmsgpack": true, "bit": true, "struct": true, "select": true, "pcall": true, "next": true, "assert": true,
	"KEYS": true, "ARGV": true}

var (
	reCall = regexp.MustCompile(`(^|[^.:A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]*)\s*\(`)
	// reDecl matches a name's local declarations: local function f (and its
	// parameters), local a, f = …, f = function, and function parameters.
	reDecl = regexp.MustCompile(`local function ([A-Za-z_][A-Za-z0-9_]*)\(([^)]*)\)|local ([A-Za-z_][A-Za-z0-9_ ,]*)|([A-Za-z_][A-Za-z0-9_]*) = function|function[^(]*\(([^)]*)\)|for ([A-Za-z_][A-Za-z0-9_ ,]*) in`)
)

// TestScriptsDefineWhatTheyCall checks each assembled script over its
// source: every function it calls is a Lua or Redis global or declared in
// it (a prelude definition it needs and assemble left out would be a
// "nonexistent global" error at run time, in whatever path first calls it).
func TestScriptsDefineWhatTheyCall(t *testing.T) {
	keywords := map[string]bool{"if": true, "elseif": true, "while": true, "until": true, "return": true,
		"and": true, "or": true, "not": true, "function": true, "in": true}
	for _, name := range roomScripts {
		src := assemble(prelude, mustRead("lua/"+name+".lua"))
		code := reLuaNoise.ReplaceAllString(src, " ")
		declared := map[string]bool{}
		for _, m := range reDecl.FindAllStringSubmatch(code, -1) {
			for _, g := range m[1:] {
				for _, n := range strings.Split(g, ",") {
					declared[strings.TrimSpace(n)] = true
				}
			}
		}
		for _, m := range reCall.FindAllStringSubmatch(code, -1) {
			f := m[2]
			if keywords[f] || luaGlobals[f] {
				continue
			}
			assert.True(t, declared[f], "script %s calls %s, which it does not define", name, f)
		}
	}
}

// TestAssembleTakesOnlyWhatIsUsed: a script gets the pieces it mentions and
// theirs, in the prelude's order, and none other.
func TestAssembleTakesOnlyWhatIsUsed(t *testing.T) {
	src := assemble(prelude, mustRead("lua/leave.lua"))
	assert.Contains(t, src, "local function load_config(")
	assert.Contains(t, src, "local journal_config") // the forward declaration draw_lottery needs…
	assert.Contains(t, src, "journal_config = function")
	assert.Less(t, strings.Index(src, "local journal_config"), strings.Index(src, "journal_config = function"))
	assert.NotContains(t, src, "local function ban_user(")
	assert.NotContains(t, src, "local function eta_expiry(")
	all := preludeSource()
	assert.Less(t, len(assemble(prelude, mustRead("lua/status.lua"))), len(all)+len(mustRead("lua/status.lua")))
}

// TestColdPiecesAreDefinedOnlyWhenCalled: a piece hot code calls only as
// cold().name is defined inside the loader (its closure created on the
// loader's first call, not on every call), after every hot piece it may
// name; one hot code names plainly stays at the top level; the loader
// exports every name called through it.
func TestColdPiecesAreDefinedOnlyWhenCalled(t *testing.T) {
	src := assemble(prelude, mustRead("lua/status.lua"))
	loader := strings.Index(src, "cold = function()")
	require.Positive(t, loader, "status has a loader")
	for _, f := range []string{"local function pack_fields(", "local function config_fields(", "draw_lottery = function(",
		"local function new_epoch(", "local function read_config_fields("} {
		assert.Greater(t, strings.Index(src, f), loader, "%s is cold in status", f)
	}
	for _, f := range []string{"local function load_config(", "local function now_ms(", "local function keep_clock("} {
		i := strings.Index(src, f)
		assert.True(t, i >= 0 && i < loader, "%s is hot in status", f)
	}
	assert.Contains(t, src, "COLD = {config_fields = config_fields, draw_lottery = draw_lottery, journal_config = journal_config}")
	// The tick calls pack_config and journal_config itself: hot there, and exported as they are.
	tick := assemble(prelude, mustRead("lua/tick.lua"))
	loader = strings.Index(tick, "cold = function()")
	assert.Less(t, strings.Index(tick, "journal_config = function("), loader)
	assert.Less(t, strings.Index(tick, "local function pack_config("), loader)
	// A script calling no cold piece has no loader.
	assert.NotContains(t, assemble(prelude, "return num(1)"), "cold")
	assert.Panics(t, func() { assemble(prelude, "return cold().no_such_piece()") })
	// Every piece the loader defines is named in the loader only.
	a := needed(prelude, mustRead("lua/enter.lua"))
	for i := range prelude {
		assert.False(t, a.hot[i] && a.cold[i], "piece %v both hot and cold", prelude[i].defines)
	}
}

// TestConfigTableHoldsWhatTheScriptReads: load_config's table in an
// assembled script holds the fields its code names as .field, and no
// other; a field read under another name than cfg is kept too.
func TestConfigTableHoldsWhatTheScriptReads(t *testing.T) {
	fields := func(src string) []string {
		table := reConfigTable.FindString(src)
		require.NotEmpty(t, table, "load_config's table, one field a line")
		var out []string
		for _, m := range reConfigField.FindAllStringSubmatch(table, -1) {
			out = append(out, m[1])
		}
		return out
	}
	all := fields(preludeSource())
	require.Len(t, all, 23)
	complete, _ := assembleKeys(prelude, mustRead("lua/complete.lua"))
	got := fields(complete)
	assert.Contains(t, got, "epoch")
	assert.Contains(t, got, "journal")
	assert.NotContains(t, got, "retention", "complete never reads it")
	assert.NotContains(t, got, "auto")
	assert.Less(t, len(got), len(all))
	kept := fields(assemble(prelude, "local cfg = load_config(false)\nlocal x = cfg\nreturn x.retention"))
	assert.Contains(t, kept, "retention")
	assert.Len(t, fields(assemble(prelude, mustRead("lua/tick.lua"))), 23, "the tick reads every field")
}

// TestScriptsFlushTheirJournal: journal_entry only collects a call's entry
// events; a script that may journal one (its assembly holds journal_entry,
// or it fills cfg.journal_buf itself: status's claims) writes them with
// journal_flush, or they are lost.
func TestScriptsFlushTheirJournal(t *testing.T) {
	var journaling []string
	for _, name := range roomScripts {
		body := mustRead("lua/" + name + ".lua")
		if !strings.Contains(assemble(prelude, body), "local function journal_entry(") && !strings.Contains(body, "cfg.journal_buf") {
			continue
		}
		journaling = append(journaling, name)
		assert.Contains(t, body, "journal_flush(cfg)", "%s journals entry events", name)
	}
	assert.Equal(t, []string{"enter", "status", "leave", "complete", "revoke", "tick", "ban", "invite"}, journaling)
}

// TestSplitPreludeKeepsEverything: the pieces, in order, are the whole
// prelude (no line lost or moved).
func TestSplitPreludeKeepsEverything(t *testing.T) {
	var b strings.Builder
	for _, p := range prelude {
		require.NotEmpty(t, p.defines)
		b.WriteString(p.src)
	}
	assert.Equal(t, strings.TrimRight(preludeSource(), "\n"), strings.TrimRight(b.String(), "\n"))
}

// TestAssembleKeysTakesOnlyTheKeysUsed: a script assembled with
// assembleKeys binds exactly the K_ names its code mentions, to KEYS[1…n]
// in the room's key order, and names the roomKeys it takes; a body naming
// KEYS itself cannot take a subset.
func TestAssembleKeysTakesOnlyTheKeysUsed(t *testing.T) {
	src, keys := assembleKeys(prelude, "return redis.call('GET', K_SEQ)")
	assert.Equal(t, []int{4}, keys)
	assert.True(t, strings.HasPrefix(src, "local K_SEQ = KEYS[1]\n"), src)

	src, keys = assembleKeys(prelude, mustRead("lua/status.lua"))
	_, statusKeys := loadKeys("status")
	assert.Equal(t, statusKeys, keys)
	head, code, _ := strings.Cut(src, "\n")
	m := regexp.MustCompile(`^local ([A-Z_, ]+) = ([A-Z0-9\[\], ]+)$`).FindStringSubmatch(head)
	require.NotNil(t, m, head)
	names := strings.Split(m[1], ", ")
	require.Len(t, names, len(keys))
	all := roomKeys("r")
	for i, n := range names {
		assert.Equal(t, "fg:{r}:"+strings.ToLower(strings.TrimPrefix(n, "K_")), all[keys[i]], "KEYS[%d]", i+1)
		assert.Contains(t, luaIdents(code), n, "%s is bound but not used", n)
	}
	for id := range luaIdents(code) {
		if strings.HasPrefix(id, "K_") {
			assert.Contains(t, names, id, "%s is used but not bound", id)
		}
	}
	assert.Less(t, len(keys), len(all))
	assert.NotContains(t, names, "K_INVITES")
	assert.Panics(t, func() { assembleKeys(prelude, "return #KEYS") })

	// A script's own keys follow the room keys it takes: KEYS[ROOM_KEYS + i].
	src, keys = assembleKeys(prelude, "return redis.call('MGET', K_SEQ, KEYS[ROOM_KEYS + 1])")
	assert.Equal(t, []int{4}, keys)
	assert.True(t, strings.HasPrefix(src, "local K_SEQ = KEYS[1]\nlocal ROOM_KEYS = 1\n"), src)
	assert.Contains(t, assemble(prelude, "return KEYS[ROOM_KEYS + 1]"), "local ROOM_KEYS = 17\n", "assemble: every room key")
	assert.Panics(t, func() { assembleKeys(prelude, "return KEYS[18]") })
	src, keys = assembleKeys(prelude, mustRead("lua/complete.lua"))
	_, completeKeys := loadKeys("complete")
	assert.Equal(t, completeKeys, keys)
	assert.Contains(t, src, "\nlocal ROOM_KEYS = "+strconv.Itoa(len(keys))+"\n")
	assert.Less(t, len(keys), len(all))
}
