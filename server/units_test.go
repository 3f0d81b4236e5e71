package server

import (
	"encoding/json"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// unitExceptions are the JSON members that look like a time or a duration
// and are not Unix ms or ms, each with its reason (docs/http-api.md
// "Units"). Keyed by schema (the nearest components/schemas name, or the
// path of an inline schema) and member.
var unitExceptions = map[string]string{
	// NumericDate seconds, compared with the admission token's iat (RFC 7519 §2).
	"StopResponse.not_before": "JWT NumericDate",
	"Directives.not_before":   "JWT NumericDate",
	"BeaconClaims.iat":        "JWT NumericDate",
	"BeaconClaims.exp":        "JWT NumericDate",
	// Where an operator types a time, the admin API also takes RFC 3339.
	"RoomPatch.opens_at":        "RFC 3339 input",
	"RoomPatch.closes_at":       "RFC 3339 input",
	"InvitesRequest.expires_at": "RFC 3339 input",
}

var (
	// timeyName: a member name that says time or duration.
	timeyName = regexp.MustCompile(`(^|_)(at|until|time|since|s|sec|secs|seconds|minutes|hours|ttl|timeout|duration|delay|interval|window|age|eta|minute|before|after)(_|$)`)
	// unitWords: a description that gives a time unit.
	unitWords = regexp.MustCompile(`(?i)\b(unix|seconds?|ms|milliseconds?|rfc 3339|date-time)\b`)
	// instantWords: a description that says the member is an instant.
	instantWords = regexp.MustCompile(`(?i)\bunix\b|rfc 3339`)
	// instantName: the name of an instant.
	instantName = regexp.MustCompile(`(^|_)(at|until)_ms$`)
	// rates are counts per time, not durations.
	rateName = regexp.MustCompile(`_per_(second|minute|hour)$`)
)

// TestOpenAPIUnits holds every JSON member of the API to one rule: an
// instant is Unix ms named *_at_ms (or *_until_ms), a duration is ms named
// *_ms; a member that looks like either (by name, by an RFC 3339 format,
// or by a unit in its description) and breaks the rule must be deprecated
// or one of unitExceptions.
func TestOpenAPIUnits(t *testing.T) {
	var doc any
	require.NoError(t, json.Unmarshal(openAPIDoc, &doc))
	var bad, used []string
	walkProperties(doc, "", "", func(schema, name string, p map[string]any) {
		key := schema + "." + name
		if p["deprecated"] == true {
			return
		}
		switch p["type"] {
		case "integer", "number", "string":
		default:
			return // objects and arrays: their members are walked
		}
		desc, _ := p["description"].(string)
		format, _ := p["format"].(string)
		timey := format == "date-time" || format == "date" || format == "duration" ||
			(timeyName.MatchString(name) && !rateName.MatchString(name)) ||
			(p["type"] == "integer" || p["type"] == "number") && unitWords.MatchString(desc) && !rateName.MatchString(name)
		if !timey && !strings.HasSuffix(name, "_ms") {
			return
		}
		if _, ok := unitExceptions[key]; ok {
			used = append(used, key)
			return
		}
		switch {
		case !strings.HasSuffix(name, "_ms"):
			bad = append(bad, key+": a time or duration without the _ms suffix")
		case p["type"] != "integer" && p["type"] != "number":
			bad = append(bad, key+": an _ms member that is not a number")
		case instantWords.MatchString(desc) && !instantName.MatchString(name):
			bad = append(bad, key+": an instant (Unix ms) not named *_at_ms or *_until_ms")
		case instantName.MatchString(name) && !strings.Contains(strings.ToLower(desc), "unix"):
			bad = append(bad, key+": an instant whose description does not say Unix ms")
		}
	})
	sort.Strings(bad)
	assert.Empty(t, bad, "docs/http-api.md#units: deprecate the member (with a replacement) or, for a standard's reason, add it to unitExceptions")
	for key := range unitExceptions {
		assert.True(t, slices.Contains(used, key), "unitExceptions: %s is not in openapi.json (or no longer looks like a time): drop it", key)
	}
}

// walkProperties calls f for every member of every schema's properties in
// v (the decoded document), schema naming the nearest components/schemas
// entry or, for an inline schema, the path to it.
func walkProperties(v any, path, schema string, f func(schema, name string, p map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		if props, ok := v["properties"].(map[string]any); ok {
			for name, p := range props {
				if pm, ok := p.(map[string]any); ok {
					f(schema, name, pm)
				}
			}
		}
		for k, c := range v {
			s := schema
			if strings.HasSuffix(path, "/components/schemas") {
				s = k
			} else if s == "" {
				s = path + "/" + k
			}
			walkProperties(c, path+"/"+k, s, f)
		}
	case []any:
		for _, c := range v {
			walkProperties(c, path, schema, f)
		}
	}
}
