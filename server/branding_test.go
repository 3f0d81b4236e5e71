package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/issuer"
)

// The admin API sets the page's branding: PUT merges (omitted keeps, ""
// clears), GET reads it, bad values are 400 invalid_input.
func TestAdminRoomBranding(t *testing.T) {
	e := newEnv(t)
	room := "brand-" + strings.TrimPrefix(e.room(issuer.RoomConfig{}), "srv-")
	base := "/admin/rooms/" + room

	r := e.admin("PUT", base, `{"capacity":2,"page_title":"Spring drop","page_message":"One per customer.\nGood luck!","brand_color":"#AA3300"}`)
	require.Equal(t, 201, r.status, "%s", r.body)
	var rc RoomConfig
	require.NoError(t, json.Unmarshal(r.body, &rc))
	assert.Equal(t, "Spring drop", rc.PageTitle)
	assert.Equal(t, "One per customer.\nGood luck!", rc.PageMessage)
	assert.Equal(t, "#AA3300", rc.BrandColor)

	// Omitted members keep their value.
	r = e.admin("PUT", base, `{"batch":5}`)
	require.Equal(t, 200, r.status, "%s", r.body)
	rc = RoomConfig{}
	require.NoError(t, json.Unmarshal(r.body, &rc))
	assert.Equal(t, "Spring drop", rc.PageTitle)
	assert.Equal(t, "#AA3300", rc.BrandColor)

	// Bad values: 400, nothing changed.
	for _, body := range []string{
		`{"brand_color":"red"}`, `{"brand_color":"#abc"}`, `{"brand_color":"#12345g"}`,
		`{"page_title":"` + strings.Repeat("x", 81) + `"}`, `{"page_title":"a\nb"}`,
		`{"page_message":"` + strings.Repeat("x", 501) + `"}`, `{"page_message":"a\u0000b"}`,
		`{"page_title":5}`,
	} {
		e.admin("PUT", base, body).problem(t, 400, "invalid_input")
	}

	// GET reads it; "" clears.
	r = e.admin("GET", base, "")
	require.Equal(t, 200, r.status)
	assert.Equal(t, "Spring drop", r.json(t)["page_title"])
	assert.Equal(t, "#AA3300", r.json(t)["brand_color"])
	r = e.admin("PUT", base, `{"page_message":"","brand_color":""}`)
	require.Equal(t, 200, r.status, "%s", r.body)
	r = e.admin("GET", base, "")
	require.Equal(t, 200, r.status)
	got := r.json(t)
	assert.Equal(t, "Spring drop", got["page_title"])
	assert.NotContains(t, got, "page_message")
	assert.NotContains(t, got, "brand_color")

	// Changing the state keeps the branding.
	r = e.admin("POST", base+"/pause", "")
	require.Equal(t, 200, r.status)
	assert.Equal(t, "Spring drop", r.json(t)["page_title"])
}

// The page shows the room's title and message, escaped, lines broken by
// <br>, and links the room's brand stylesheet — with the CSP unchanged.
func TestPageBranding(t *testing.T) {
	e := pageEnv(t)
	room := e.room(issuer.RoomConfig{Capacity: 5, PageTitle: `Drop <script>alert(1)</script>`,
		PageMessage: "Limited stock & <b>bold</b>\nOne per customer", BrandColor: "#FFCC00"})
	r := e.page(room, "", "")
	require.Equal(t, 200, r.status, "%s", r.body)
	assertPageHeaders(t, r)
	body := string(r.body)
	assert.NotContains(t, body, "<script>alert(1)</script>")
	assert.NotContains(t, body, "<b>bold</b>")
	assert.Contains(t, body, `<p class="room room-title" id="room-title">Drop &lt;script&gt;alert(1)&lt;/script&gt;</p>`)
	assert.Contains(t, body, `<title>It’s your turn · Drop &lt;script&gt;alert(1)&lt;/script&gt;</title>`)
	assert.Contains(t, body, `<p class="room-message" id="room-message" dir="auto">Limited stock &amp; &lt;b&gt;bold&lt;/b&gt;<br>One per customer</p>`)
	assert.Equal(t, "Drop &lt;script&gt;alert(1)&lt;/script&gt;", dataAttr(t, r.body, "title"))
	// The colour is inline (with the page's stylesheet, allowed by its hash).
	assert.Contains(t, body, `:root{--accent:#ffcc00;--on-accent:#000}</style>`)

	// The stylesheet: the colour, dark text on a light accent.
	s := e.do(req{method: "GET", path: "/wait/" + room + "/brand.css?v=ffcc00"})
	require.Equal(t, 200, s.status, "%s", s.body)
	assert.Equal(t, "text/css; charset=utf-8", s.header.Get("Content-Type"))
	assert.Equal(t, "nosniff", s.header.Get("X-Content-Type-Options"))
	assert.Equal(t, assetMaxAge, s.header.Get("Cache-Control"))
	assert.Equal(t, ":root{--accent:#ffcc00;--on-accent:#000}\n", string(s.body))

	// Unbranded: the built-in page, no brand stylesheet; its stylesheet
	// changes nothing.
	plain := e.room(issuer.RoomConfig{Capacity: 5})
	r = e.page(plain, "", "")
	require.Equal(t, 200, r.status)
	assertPageHeaders(t, r)
	assert.NotRegexp(t, `:root\{--accent:#[0-9a-f]{6};--on-accent:#(?:000|fff)\}</style>`, string(r.body))
	assert.Contains(t, string(r.body), `<p class="room-message" id="room-message" dir="auto" hidden></p>`, "an empty slot for a live message")
	assert.Contains(t, string(r.body), `<p class="room">Waiting room <span class="room-id" dir="auto">`+plain+`</span></p>`)
	s = e.do(req{method: "GET", path: "/wait/" + plain + "/brand.css"})
	require.Equal(t, 200, s.status)
	assert.NotContains(t, string(s.body), "--accent")

	// Unknown and malformed rooms: problems.
	e.do(req{method: "GET", path: "/wait/nope-" + plain + "/brand.css"}).problem(t, 404, "unknown_room")
	e.do(req{method: "GET", path: "/wait/a%7Bb/brand.css"}).problem(t, 400, "invalid_input")
}

func TestOnAccent(t *testing.T) {
	for col, want := range map[string]string{
		"#000000": "#fff", "#ffffff": "#000", "#0b57d0": "#fff", "#ffcc00": "#000",
		"#777777": "#000", "#757575": "#fff", "#8ab4f8": "#000", "#d00000": "#fff",
	} {
		assert.Equal(t, want, onAccent(col), col)
	}
}
