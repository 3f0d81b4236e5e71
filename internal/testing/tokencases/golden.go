package tokencases

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/flashgate/flashgate/verifier"
)

// GoldenFile is the case table as committed: testdata/cases.json, written by
// `go test ./internal/testing/tokencases -run TestGolden -update` from Build and
// checked byte for byte by TestGolden. The native verifier tests, the wasm
// harness (wazero) and the worker harness (workerd) all read this file, so
// all three run the same bytes.
const GoldenFile = "testdata/cases.json"

// GoldenPath is GoldenFile relative to the directory of a package at depth
// levels below the module root (1 for verifier/ or wasm/, 2 for
// examples/cloudflare-worker/), the working directory of its tests.
func GoldenPath(depth int) string {
	parts := make([]string, 0, depth+3)
	for range depth {
		parts = append(parts, "..")
	}
	return filepath.Join(append(parts, "internal", "testing", "tokencases", filepath.FromSlash(GoldenFile))...)
}

// golden is the JSON form of a Set.
//
// A token is Token + Repeat×Count + Tail: inputs far beyond MaxTokenSize
// (1 MiB floods) are stored as a head, one repeated string and a tail so the
// file stays small; every other token is Token alone.
type golden struct {
	About      string               `json:"about"`
	Issuer     string               `json:"iss"`
	Audience   string               `json:"aud"`
	JWKS       string               `json:"jwks"` // the exact bytes for set_keys / ParseJWKS
	Keys       map[string]goldenKey `json:"keys"` // current, previous, rogue
	Valid      string               `json:"valid"`
	CodeNames  []string             `json:"code_names"` // code number → name, as in verifier/errors.go
	Cases      []goldenCase         `json:"cases"`
	CaseFields string               `json:"case_fields"`
}

type goldenKey struct {
	KID  string `json:"kid"`
	Seed string `json:"seed"` // base64url Ed25519 seed: test keys, public on purpose
}

type goldenCase struct {
	Name       string  `json:"name"`
	Source     string  `json:"source"`
	Token      string  `json:"token"`
	Repeat     string  `json:"repeat,omitempty"`
	Count      int     `json:"count,omitempty"`
	Tail       string  `json:"tail,omitempty"`
	Now        int64   `json:"now"`
	Product    string  `json:"product"`
	User       string  `json:"user"`
	Leeway     int64   `json:"leeway"`
	Want       string  `json:"want"`
	WantCode   int     `json:"want_code"`
	WantClaims *Claims `json:"want_claims,omitempty"`
}

const goldenAbout = "flashgate admission-token case table (internal/testing/tokencases). Generated: " +
	"go test ./internal/testing/tokencases -run TestGolden -update. Do not edit by hand."

const goldenCaseFields = "token = token + repeat×count + tail; verify at now (Unix s) with Config{iss, aud, " +
	"leeway s} and Expect{product, user}; want is the code name (want_code its number); " +
	"want_claims are the claims of an accepted token."

// longToken is the length above which a token is stored as head, run, tail.
const longToken = 2 * verifier.MaxTokenSize

// Encode returns the golden JSON of s (deterministic: the same Set always
// gives the same bytes).
func Encode(s *Set) ([]byte, error) {
	g := golden{
		About: goldenAbout, Issuer: s.Issuer, Audience: s.Audience, JWKS: string(s.JWKS), Valid: s.Valid,
		Keys: map[string]goldenKey{
			"current":  {s.CurrentKID, b64.EncodeToString(s.Current.Seed())},
			"previous": {s.PreviousKID, b64.EncodeToString(s.Previous.Seed())},
			"rogue":    {s.RogueKID, b64.EncodeToString(s.Rogue.Seed())},
		},
		CaseFields: goldenCaseFields,
	}
	for c := verifier.CodeOK; c.String() != "unknown"; c++ {
		g.CodeNames = append(g.CodeNames, c.String())
	}
	for _, c := range s.Cases {
		gc := goldenCase{
			Name: c.Name, Source: c.Source, Token: c.Token, Now: c.Now, Product: c.Product, User: c.User,
			Leeway: c.Leeway, Want: c.Want.String(), WantCode: int(c.Want),
		}
		if len(c.Token) > longToken {
			gc.Token, gc.Repeat, gc.Count, gc.Tail = splitRun(c.Token)
		}
		if w := c.WantClaims; w != nil {
			cp := *w
			gc.WantClaims = &cp
		}
		g.Cases = append(g.Cases, gc)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(g); err != nil {
		return nil, err
	}
	// Round trip: the file must give back exactly s (e.g. no token may
	// carry invalid UTF-8, which JSON would replace).
	back, err := Decode(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("tokencases: golden round trip: %w", err)
	}
	for i := range s.Cases {
		if back.Cases[i].Token != s.Cases[i].Token {
			return nil, fmt.Errorf("tokencases: golden round trip changes the token of %s", s.Cases[i].Name)
		}
	}
	return buf.Bytes(), nil
}

// splitRun splits tok around its longest run of one byte.
func splitRun(tok string) (head, repeat string, count int, tail string) {
	best, bestLen := 0, 0
	for i := 0; i < len(tok); {
		j := i
		for j < len(tok) && tok[j] == tok[i] {
			j++
		}
		if j-i > bestLen {
			best, bestLen = i, j-i
		}
		i = j
	}
	return tok[:best], tok[best : best+1], bestLen, tok[best+bestLen:]
}

// Load reads a golden file (see GoldenFile, GoldenPath).
func Load(path string) (*Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Decode parses golden JSON (the output of Encode).
func Decode(data []byte) (*Set, error) {
	var g golden
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return nil, err
	}
	s := &Set{Issuer: g.Issuer, Audience: g.Audience, JWKS: []byte(g.JWKS), Valid: g.Valid}
	for name, dst := range map[string]struct {
		key *ed25519.PrivateKey
		kid *string
	}{
		"current": {&s.Current, &s.CurrentKID}, "previous": {&s.Previous, &s.PreviousKID}, "rogue": {&s.Rogue, &s.RogueKID},
	} {
		k, ok := g.Keys[name]
		if !ok {
			return nil, fmt.Errorf("no %s key", name)
		}
		seed, err := b64.DecodeString(k.Seed)
		if err != nil || len(seed) != ed25519.SeedSize {
			return nil, fmt.Errorf("%s key: bad seed", name)
		}
		*dst.key = ed25519.NewKeyFromSeed(seed)
		if *dst.kid = k.KID; Thumbprint(dst.key.Public().(ed25519.PublicKey)) != k.KID {
			return nil, fmt.Errorf("%s key: kid is not the seed's thumbprint", name)
		}
	}
	codes := map[string]verifier.Code{}
	for c := verifier.CodeOK; c.String() != "unknown"; c++ {
		codes[c.String()] = c
	}
	for _, gc := range g.Cases {
		want, ok := codes[gc.Want]
		if !ok || int(want) != gc.WantCode {
			return nil, fmt.Errorf("case %s: want %q / %d is not a verifier code", gc.Name, gc.Want, gc.WantCode)
		}
		c := Case{
			Name: gc.Name, Source: gc.Source, Token: gc.Token + strings.Repeat(gc.Repeat, gc.Count) + gc.Tail,
			Now: gc.Now, Product: gc.Product, User: gc.User, Leeway: gc.Leeway, Want: want,
		}
		if w := gc.WantClaims; w != nil {
			cp := *w
			c.WantClaims = &cp
		}
		s.Cases = append(s.Cases, c)
	}
	return s, nil
}
