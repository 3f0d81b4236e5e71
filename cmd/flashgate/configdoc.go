package main

import (
	"fmt"
	"io"
	"reflect"
	"strings"
)

//go:generate go test . -run ^TestConfigurationDoc$ -update

// configDoc is docs/configuration.md, relative to this package's directory;
// TestConfigurationDoc holds it equal to writeConfigDoc's output.
const configDoc = "../../docs/configuration.md"

// envCommands are the commands configured by environment variables (an
// envCommand each), in the order docs/configuration.md lists them: a new
// one is added here too.
var envCommands = []struct {
	name, about string
	env         reflect.Type
}{
	{"serve", "The issuer: the HTTP API and the admission tick loop", reflect.TypeOf(serveEnv{})},
	{"journal run", "The journal process: every room's journal stream from Redis into PostgreSQL", reflect.TypeOf(journalEnv{})},
}

// writeConfigDoc writes docs/configuration.md: one table per command of
// envCommands, its variables in declaration order, from the same env,
// envDefault and help tags `flashgate CMD -h` prints. Deterministic: no
// map, no clock.
func writeConfigDoc(w io.Writer) {
	fmt.Fprint(w, "# Configuration reference\n\n"+
		"<!-- Generated from the env, envDefault and help tags of cmd/flashgate (config.go, journal.go).\n"+
		"     Do not edit: change the tags and run `make docs` (go generate ./cmd/flashgate). -->\n\n"+
		"Each command below reads only the environment (caarlos0/env); `flashgate CMD -h` prints the same\n"+
		"table. A value that does not parse is reported under its variable's name and the command exits 2.\n"+
		"Durations are Go durations (`1m30s`, `200ms`): the unit is in the value, so no name carries one\n"+
		"(in JSON, where durations are numbers, names end in `_ms`); lists are comma-separated. Unset means the\n"+
		"default shown; `0` means off only where the meaning says so. The variables whose meaning names `off`\n"+
		"take that word (any case); where their `0` is deprecated it still means off for this release, with a\n"+
		"warning at startup, and will then be refused — it never silently becomes the default.\n")
	for _, c := range envCommands {
		fmt.Fprintf(w, "\n## flashgate %s\n\n%s.\n\n", c.name, c.about)
		fmt.Fprint(w, "| variable | default | meaning |\n|---|---|---|\n")
		for _, v := range envDoc(c.env, "") {
			def := v.defaultWord()
			if v.def != "" {
				def = "`" + def + "`"
			}
			fmt.Fprintf(w, "| `%s` | %s | %s |\n", v.name, def, markdownCell(v.help))
		}
	}
}

// markdownCell escapes s for a GitHub table cell: | would end the cell,
// <x> would be read as an HTML tag, * and _ as emphasis.
func markdownCell(s string) string {
	return strings.NewReplacer(`\`, `\\`, "|", `\|`, "<", "&lt;", ">", "&gt;", "*", `\*`).Replace(s)
}
