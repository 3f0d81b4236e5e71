package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServePageDirConfig(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "wait.html"), []byte(`<p>{{.Heading}}</p>`), 0o644))
	c, err := loadServeEnv(map[string]string{"FLASHGATE_PAGE_DIR": dir})
	require.NoError(t, err)
	assert.Equal(t, dir, c.Serve.serverOptions().PageDir)

	bad := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bad, "wait.html"), []byte(`{{.Heading`), 0o644))
	_, err = loadServeEnv(map[string]string{"FLASHGATE_PAGE_DIR": bad})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "FLASHGATE_PAGE_DIR:")
	assert.Contains(t, err.Error(), "does not parse")

	// The page's catalogs: a directory of {tag}.json, a language to fall back to.
	loc := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(loc, "de.json"), []byte(`{"continue.button":"Weiter"}`), 0o644))
	c, err = loadServeEnv(map[string]string{"FLASHGATE_PAGE_LOCALE_DIR": loc, "FLASHGATE_PAGE_LANGUAGE": "de"})
	require.NoError(t, err)
	assert.Equal(t, loc, c.Serve.serverOptions().PageLocaleDir)
	assert.Equal(t, "de", c.Serve.serverOptions().PageLanguage)
	require.NoError(t, os.WriteFile(filepath.Join(loc, "fr.json"), []byte(`{"continue.button":`), 0o644))
	_, err = loadServeEnv(map[string]string{"FLASHGATE_PAGE_LOCALE_DIR": loc})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "FLASHGATE_PAGE_LOCALE_DIR")
	assert.Contains(t, err.Error(), "fr.json")
	_, err = loadServeEnv(map[string]string{"FLASHGATE_PAGE_LANGUAGE": "tlh"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no such catalog")

	r := runCLI(t, "", "serve", "-h")
	assert.Contains(t, r.stdout, "FLASHGATE_PAGE_DIR")
}
