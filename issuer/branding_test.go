package issuer_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
)

// The waiting page's branding fields: bounds, character sets, colour syntax.
func TestRoomConfigValidatesBranding(t *testing.T) {
	base := issuer.RoomConfig{}.WithDefaults()
	for name, c := range map[string]struct {
		title, message, color string
		ok                    bool
	}{
		"none":                  {"", "", "", true},
		"all set":               {"Spring drop", "Limited stock.\nOne per customer.", "#0B57d0", true},
		"title 80 bytes":        {strings.Repeat("é", 40), "", "", true},
		"title 81 bytes":        {strings.Repeat("a", 81), "", "", false},
		"title newline":         {"a\nb", "", "", false},
		"title tab":             {"a\tb", "", "", false},
		"title C1 control":      {"a\u0085b", "", "", false},
		"title bad UTF-8":       {"a\xffb", "", "", false},
		"message 500 bytes":     {"", strings.Repeat("x\n", 250), "", true},
		"message 501 bytes":     {"", strings.Repeat("x", 501), "", false},
		"message carriage ret.": {"", "a\r\nb", "", false},
		"message DEL":           {"", "a\x7fb", "", false},
		"colour short":          {"", "", "#fff", false},
		"colour no hash":        {"", "", "0b57d0", false},
		"colour name":           {"", "", "red", false},
		"colour not hex":        {"", "", "#0b57dg", false},
		"colour css injection":  {"", "", "#000;}*{", false},
	} {
		cfg := base
		cfg.PageTitle, cfg.PageMessage, cfg.BrandColor = c.title, c.message, c.color
		err := cfg.Validate()
		if c.ok {
			assert.NoError(t, err, name)
		} else {
			assert.ErrorIs(t, err, flashgate.ErrInvalidInput, name)
		}
	}
}

// Branding round-trips through SetRoom and Room, merges in UpdateRoom (nil
// keeps, "" clears), and a refused patch leaves it alone.
func TestRoomBrandingRoundTrip(t *testing.T) {
	ctx := context.Background()
	is := newIssuer(t, redistest.Start(t).Client(t), nil)
	room := redistest.Room("brand")
	str := func(s string) *string { return &s }

	want := issuer.RoomConfig{Capacity: 3, PageTitle: "Spring drop <b>", PageMessage: "Line one\nLine two", BrandColor: "#aa3300"}.WithDefaults()
	got, err := is.SetRoom(ctx, room, want)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	stored, err := is.Room(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, want, stored)

	// Absent keeps, a value replaces.
	got, created, err := is.UpdateRoom(ctx, room, issuer.RoomPatch{PageTitle: str("Summer drop")})
	require.NoError(t, err)
	assert.False(t, created)
	want.PageTitle = "Summer drop"
	assert.Equal(t, want, got)

	// "" clears.
	got, _, err = is.UpdateRoom(ctx, room, issuer.RoomPatch{PageMessage: str(""), BrandColor: str("")})
	require.NoError(t, err)
	want.PageMessage, want.BrandColor = "", ""
	assert.Equal(t, want, got)
	stored, err = is.Room(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, want, stored)

	// Refused: the stored config stays.
	for name, p := range map[string]issuer.RoomPatch{
		"bad colour":    {BrandColor: str("blue")},
		"long title":    {PageTitle: str(strings.Repeat("t", issuer.MaxPageTitle+1))},
		"control chars": {PageMessage: str("a\x00b")},
	} {
		_, _, err := is.UpdateRoom(ctx, room, p)
		assert.ErrorIs(t, err, flashgate.ErrInvalidInput, name)
	}
	stored, err = is.Room(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, want, stored)

	// A created room takes the patch's branding; changing the state keeps it.
	other := redistest.Room("brand-new")
	got, created, err = is.UpdateRoom(ctx, other, issuer.RoomPatch{BrandColor: str("#102030")})
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, "#102030", got.BrandColor)
	got, err = is.SetState(ctx, other, issuer.RoomPaused)
	require.NoError(t, err)
	assert.Equal(t, "#102030", got.BrandColor)
}

// After a Redis data loss, a replica that knew the room's branding (SetRoom,
// Room) puts it back with the room — by an enter, and by the tick loop —
// even after its ticks (which report no branding) refreshed the known config.
func TestLostRoomRestoresBranding(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	cfg := issuer.RoomConfig{Capacity: 4, Tick: 100 * time.Millisecond, PageTitle: "Drop", PageMessage: "Hi\nthere", BrandColor: "#123456"}.WithDefaults()

	t.Run("by enter", func(t *testing.T) {
		room := redistest.Room("brand-restore")
		a := newIssuer(t, rdb, nil)
		_, err := a.SetRoom(ctx, room, cfg)
		require.NoError(t, err)
		_, err = a.Tick(ctx, room)
		require.NoError(t, err)
		_, err = a.Stats(ctx, room)
		require.NoError(t, err)
		require.NoError(t, rdb.FlushAll(ctx).Err())
		_, err = a.Enter(ctx, room, "alice")
		require.NoError(t, err)
		got, err := a.Room(ctx, room)
		require.NoError(t, err)
		assert.Equal(t, cfg, got)
	})

	t.Run("by the tick loop", func(t *testing.T) {
		room := redistest.Room("brand-restore")
		b := newIssuer(t, rdb, nil)
		_, err := b.SetRoom(ctx, room, cfg)
		require.NoError(t, err)
		require.NoError(t, rdb.FlushAll(ctx).Err())
		defer runUntilRestored(t, b)()
		require.EqualValues(t, 1, b.Observe().RoomsRestored)
		got, err := b.Room(ctx, room)
		require.NoError(t, err)
		assert.Equal(t, cfg, got)
	})
}

// A DefaultRoom's branding goes with the rooms it creates.
func TestDefaultRoomBranding(t *testing.T) {
	ctx := context.Background()
	is := newIssuer(t, redistest.Start(t).Client(t), nil, func(c *issuer.Config) {
		c.DefaultRoom = &issuer.RoomConfig{PageTitle: "Welcome", BrandColor: "#ffcc00"}
	})
	room := redistest.Room("auto-brand")
	_, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	got, err := is.Room(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, "Welcome", got.PageTitle)
	assert.Equal(t, "#ffcc00", got.BrandColor)
}
