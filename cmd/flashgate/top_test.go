package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/flashgate/flashgate/internal/testing/redistest"
)

// TestTopWiring: top takes the token from FLASHGATE_ADMIN_TOKEN only (none:
// usage error naming it), and shows an unreachable server instead of failing.
func TestTopWiring(t *testing.T) {
	var out, errb bytes.Buffer
	t.Setenv("FLASHGATE_ADMIN_TOKEN", "")
	assert.Equal(t, exitUsage, run(context.Background(), []string{"top", "-n", "1"}, strings.NewReader(""), &out, &errb))
	assert.Contains(t, errb.String(), "FLASHGATE_ADMIN_TOKEN")

	t.Setenv("FLASHGATE_ADMIN_TOKEN", "tok")
	url := fmt.Sprintf("http://127.0.0.1:%d", redistest.FreePort(t))
	out.Reset()
	assert.Equal(t, exitOK, run(context.Background(), []string{"top", "-n", "1", "-url", url}, strings.NewReader(""), &out, &errb))
	assert.Contains(t, out.String(), "flashgate top — "+url)
	assert.Contains(t, out.String(), "cannot read the rooms")
	assert.NotContains(t, out.String(), "\x1b[", "no screen clearing when stdout is not a terminal")
}
