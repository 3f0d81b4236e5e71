package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/issuer"
)

// TestHelpGoesToStdout: asking for help (-h, -help, --help, help) is
// not an error: every command and subcommand prints its usage on stdout,
// nothing on stderr, and exits 0, so `flashgate serve -h | less` works.
func TestHelpGoesToStdout(t *testing.T) {
	for _, args := range [][]string{
		{"-h"}, {"--help"}, {"help"},
		{"serve", "-h"}, {"serve", "--help"},
		{"simulate", "-h"}, {"simulate", "-help"},
		{"keys", "-h"}, {"keys", "help"},
		{"keys", "generate", "-h"}, {"keys", "rotate", "-h"}, {"keys", "add-next", "-h"},
		{"keys", "jwks", "-h"}, {"keys", "list", "--help"},
		{"verify", "-h"}, {"verify", "TOKEN", "--help"},
		{"invite", "-h"}, {"top", "-h"},
	} {
		r := runCLI(t, "", args...)
		assert.Equal(t, exitOK, r.code, "%v", args)
		assert.Contains(t, r.stdout, "Usage", "%v", args)
		assert.Empty(t, r.stderr, "%v", args)
	}
	// -h of a subcommand lists its flags.
	assert.Contains(t, runCLI(t, "", "keys", "rotate", "-h").stdout, "-max-token-lifetime")
	assert.Contains(t, runCLI(t, "", "verify", "-h").stdout, "-jwks")
	assert.Contains(t, runCLI(t, "", "simulate", "-h").stdout, "-users")
	assert.Contains(t, runCLI(t, "", "invite", "-h").stdout, "-reusable")
}

// TestBadFlagGoesToStderr: a wrong flag is still a usage error: the error
// and the usage on stderr, exit status 2, nothing on stdout.
func TestBadFlagGoesToStderr(t *testing.T) {
	for _, args := range [][]string{{"serve", "-x"}, {"simulate", "-x"}, {"keys", "rotate", "-x"},
		{"verify", "-x"}, {"invite", "-x"}} {
		r := runCLI(t, "", args...)
		assert.Equal(t, exitUsage, r.code, "%v", args)
		assert.Contains(t, r.stderr, "flag provided but not defined", "%v", args)
		assert.Contains(t, r.stderr, "Usage", "%v", args)
		assert.Empty(t, r.stdout, "%v", args)
	}
}

// TestEnvErrorsNameTheVariable: a value caarlos0/env cannot parse is
// reported under the variable's name (FLASHGATE_…), never the Go field's,
// for every variable of a type that can fail to parse; several bad
// variables are all named.
func TestEnvErrorsNameTheVariable(t *testing.T) {
	vars := envDoc(reflect.TypeOf(serveEnv{}), "")
	seen := map[string]bool{}
	for _, v := range vars {
		require.False(t, seen[v.field], "Go field %s twice: envNames needs unique field names", v.field)
		seen[v.field] = true
	}
	bad := map[string]string{}
	typ := map[string]reflect.Type{}
	fieldType(reflect.TypeOf(serveEnv{}), typ)
	n := 0
	for _, v := range vars {
		switch typ[v.field].Kind() {
		case reflect.Int, reflect.Int64, reflect.Bool, // time.Duration is an int64
			reflect.Struct: // offOr: a number or off
		default:
			continue
		}
		n++
		_, err := loadServeEnv(map[string]string{v.name: "x!"})
		require.Error(t, err, v.name)
		assert.True(t, strings.HasPrefix(err.Error(), v.name+": not a valid "), "%s: %v", v.name, err)
		assert.NotContains(t, err.Error(), `"`+v.field+`"`, v.name)
		bad[v.name] = "x!"
	}
	require.Greater(t, n, 10, "the variables that can fail to parse")
	_, err := loadServeEnv(bad)
	require.Error(t, err)
	for name := range bad {
		assert.Contains(t, err.Error(), name)
	}
	_, err = loadServeEnv(map[string]string{"FLASHGATE_SHUTDOWN_TIMEOUT": "5"})
	assert.ErrorContains(t, err, "FLASHGATE_SHUTDOWN_TIMEOUT: not a valid duration (e.g. 1m30s)")
}

// fieldType records the type of every field of t, nested structs included.
func fieldType(t reflect.Type, out map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Type.Kind() == reflect.Struct && f.Tag.Get("env") == "" {
			fieldType(f.Type, out)
			continue
		}
		out[f.Name] = f.Type
	}
}

// TestKeysPathIsADirectory: a key ring path that names a directory is
// reported as one ("is a directory", the file path to give instead), not as
// a file whose mode needs chmod 600, by every command that reads or writes
// the ring, serve included.
func TestKeysPathIsADirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys.json")
	require.NoError(t, os.Mkdir(dir, 0o755)) // a mode keys.Load would refuse for a file
	for _, args := range [][]string{
		{"keys", "list", "-file", dir}, {"keys", "jwks", "-file", dir}, {"keys", "rotate", "-file", dir},
		{"keys", "add-next", "-file", dir}, {"keys", "generate", "-file", dir}, {"keys", "generate", "-force", "-file", dir},
		{"invite", "-room", "r", "-file", dir},
	} {
		r := runCLI(t, "", args...)
		assert.Equal(t, exitFailure, r.code, "%v", args)
		assert.Contains(t, r.stderr, "is a directory", "%v", args)
		assert.Contains(t, r.stderr, filepath.Join(dir, "flashgate-keys.json"), "%v", args)
		assert.NotContains(t, r.stderr, "chmod", "%v", args)
	}
	t.Setenv("FLASHGATE_KEYS_FILE", dir)
	r := runCLI(t, "", "serve")
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "is a directory")
	assert.NotContains(t, r.stderr, "chmod")
}

// TestKeysRotateWarnsShortLifetime: keys rotate warns on stderr, and still
// rotates, when -max-token-lifetime is shorter than issuer.MaxSessionDuration
// (the longest session a room may have, the bound the command can know);
// at the default, or longer, it says nothing.
func TestKeysRotateWarnsShortLifetime(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys.json")
	require.Equal(t, exitOK, runCLI(t, "", "keys", "generate", "-file", file).code)

	r := runCLI(t, "", "keys", "rotate", "-file", file, "-max-token-lifetime", "5m")
	assert.Equal(t, exitOK, r.code)
	assert.Contains(t, r.stdout, "rotated")
	assert.Contains(t, r.stderr, "warning: -max-token-lifetime 5m0s is shorter than the longest session a room may have ("+
		issuer.MaxSessionDuration.String()+")")

	for _, life := range []string{issuer.MaxSessionDuration.String(), "1h"} {
		r = runCLI(t, "", "keys", "rotate", "-file", file, "-max-token-lifetime", life)
		assert.Equal(t, exitOK, r.code, life)
		assert.Empty(t, r.stderr, life)
	}
	r = runCLI(t, "", "keys", "rotate", "-file", file)
	assert.Equal(t, exitOK, r.code)
	assert.Empty(t, r.stderr)
}
