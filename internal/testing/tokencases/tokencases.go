// Package tokencases is the shared, deterministic table of admission-token
// cases. The native verifier (verifier tests) and the TinyGo wasm build
// (wasm tests, under wazero) must both produce Case.Want for every case.
//
// Everything is derived from fixed seeds: Build returns the same keys, JWKS
// and tokens on every run, so results can be compared case by case and
// across builds.
//
// How to run a case (what verifier_test.go does and what a harness for
// another build must do):
//
//	keys := verifier.ParseJWKS(set.JWKS)
//	v := verifier.New(keys, verifier.Config{
//		Issuer: set.Issuer, Audience: set.Audience,
//		Leeway: time.Duration(c.Leeway) * time.Second,
//		Now:    func() time.Time { return time.Unix(c.Now, 0) },
//	})   // Config.Product and MaxLifetime left zero (15 min default)
//	tok, err := v.Verify(ctx, c.Token, verifier.Expect{Product: c.Product, User: c.User})
//	verifier.CodeOf(err) == c.Want; for CodeOK, tok matches *c.WantClaims.
//
// The package is test data: its private keys are public. It is never
// imported by non-test code of the verifier.
package tokencases

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jws"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/verifier"
)

// Profile constants of every case.
const (
	Issuer   = "https://issuer.example"
	Audience = "orders"
	Product  = "sku-1"
	User     = "user-12345"
	JTI      = "1234.56.1763680000000"
	// IssuedAt is the iat of the standard claims (2025-11-20T23:06:40Z).
	IssuedAt int64 = 1763680000
	// Lifetime is exp − iat of the standard claims, in seconds.
	Lifetime int64 = 300
	// ExpiresAt is the exp of the standard claims.
	ExpiresAt = IssuedAt + Lifetime
	// Now is the default verification time of a case: one minute after iat.
	Now = IssuedAt + 60
	// MaxLifetime is the verifier default (verifier.DefaultMaxLifetime) in seconds.
	MaxLifetime = int64(verifier.DefaultMaxLifetime / time.Second)
)

// Claims are the fields of an accepted token, with the member names of the
// wasm module's result JSON (wasm/README.md), the golden file's want_claims
// and the JavaScript package's claims.
type Claims struct {
	KeyID     string `json:"kid"`
	Issuer    string `json:"iss"`
	Audience  string `json:"aud"`
	User      string `json:"sub"`
	Product   string `json:"product"`
	ID        string `json:"jti"`
	IssuedAt  int64  `json:"iat"` // Unix seconds
	ExpiresAt int64  `json:"exp"` // Unix seconds
}

// ClaimsOf returns the Claims of a token the native verifier accepted.
func ClaimsOf(t *verifier.Token) Claims {
	return Claims{t.KeyID, t.Issuer, t.Audience, t.User, t.Product, t.ID, t.IssuedAt.Unix(), t.ExpiresAt.Unix()}
}

// DecodeClaims parses a claims JSON object: exactly the eight members.
func DecodeClaims(data []byte) (Claims, error) {
	var c Claims
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("claims %s: %v", data, err)
	}
	return c, nil
}

// Case is one token and the expected verification result.
type Case struct {
	Name    string
	Source  string // where the idea comes from: RFC section, Wycheproof, CVE
	Token   string
	Now     int64  // verification time, Unix seconds
	Product string // Expect.Product
	User    string // Expect.User ("" = not checked)
	Leeway  int64  // Config.Leeway, seconds
	Want    verifier.Code
	// WantClaims is set for Want == CodeOK.
	WantClaims *Claims
}

// Set is the output of Build.
type Set struct {
	Issuer, Audience string
	// JWKS is the public JWK Set: the current key and the rotated previous
	// key (both still published, as during a rotation).
	JWKS []byte
	// Current and Previous are the issuer's signing keys; Rogue is a key
	// that is not in the JWKS (an attacker's).
	Current, Previous, Rogue ed25519.PrivateKey
	// CurrentKID, PreviousKID, RogueKID are the RFC 7638 thumbprints.
	CurrentKID, PreviousKID, RogueKID string
	// Valid is a valid token (signed by Current) for Now / Product.
	Valid string
	Cases []Case
}

// Config returns the verifier configuration for c (see the package doc).
func (s *Set) Config(c Case) verifier.Config {
	now := time.Unix(c.Now, 0)
	return verifier.Config{
		Issuer:   s.Issuer,
		Audience: s.Audience,
		Leeway:   time.Duration(c.Leeway) * time.Second,
		Now:      func() time.Time { return now },
	}
}

// Expect returns the per-call expectations of c.
func (c Case) Expect() verifier.Expect {
	return verifier.Expect{Product: c.Product, User: c.User}
}

var b64 = base64.RawURLEncoding

// Key derives a deterministic Ed25519 key from a label.
func Key(label string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("flashgate tokencases seed: " + label))
	return ed25519.NewKeyFromSeed(seed[:])
}

// Thumbprint returns the RFC 7638 JWK thumbprint of an Ed25519 public key
// (RFC 8037 §2 members in lexicographic order).
func Thumbprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256([]byte(`{"crv":"Ed25519","kty":"OKP","x":"` + b64.EncodeToString(pub) + `"}`))
	return b64.EncodeToString(sum[:])
}

// Sign builds a compact JWS from the exact header and payload bytes given
// (so duplicate members and odd JSON survive) and signs it with key.
func Sign(key ed25519.PrivateKey, header, payload string) string {
	return SignSegments(key, b64.EncodeToString([]byte(header)), b64.EncodeToString([]byte(payload)))
}

// SignSegments signs the already-encoded segments as they are.
func SignSegments(key ed25519.PrivateKey, headerSeg, payloadSeg string) string {
	in := headerSeg + "." + payloadSeg
	return in + "." + b64.EncodeToString(ed25519.Sign(key, []byte(in)))
}

// obj is a JSON object written member by member: names and raw JSON values,
// in order, duplicates allowed.
type obj []kv

type kv struct{ k, v string }

func q(s string) string  { b, _ := json.Marshal(s); return string(b) }
func num(n int64) string { return strconv.FormatInt(n, 10) }

// with returns a copy with k set to raw value v (replaced in place, or appended).
func (o obj) with(k, v string) obj {
	c := append(obj(nil), o...)
	for i := range c {
		if c[i].k == k {
			c[i].v = v
			return c
		}
	}
	return append(c, kv{k, v})
}

// without returns a copy without k.
func (o obj) without(k string) obj {
	var c obj
	for _, m := range o {
		if m.k != k {
			c = append(c, m)
		}
	}
	return c
}

// plus returns a copy with k: v appended even if k exists (a duplicate).
func (o obj) plus(k, v string) obj { return append(append(obj(nil), o...), kv{k, v}) }

func (o obj) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		if strings.Contains(m.k, `\`) { // already escaped: written as is
			b.WriteString(`"` + m.k + `"`)
		} else {
			b.WriteString(q(m.k))
		}
		b.WriteByte(':')
		b.WriteString(m.v)
	}
	b.WriteByte('}')
	return b.String()
}

// objOf returns the members of the JSON object b in order, values raw.
func objOf(b []byte) obj {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		panic(fmt.Sprintf("tokencases: not a JSON object: %s", b))
	}
	var o obj
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			panic(err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			panic(err)
		}
		o = append(o, kv{k.(string), string(v)})
	}
	return o
}

// header is the issuer's protected header for kid (flashgate.NewHeader), as
// an ordered object that attack variants edit member by member.
func header(kid string) obj { return objOf(flashgate.NewHeader(kid).JSON()) }

// StandardClaims are the claims of the table's valid tokens, built by the
// issuer's own type.
func StandardClaims() flashgate.Claims {
	return flashgate.NewClaims(Issuer, Audience, User, Product, JTI, time.Unix(IssuedAt, 0), time.Unix(ExpiresAt, 0))
}

// claims is StandardClaims as an ordered object for attack variants.
func claims() obj { return objOf(StandardClaims().JSON()) }

type builder struct {
	set *Set
}

func (b *builder) add(c Case) {
	if c.Now == 0 {
		c.Now = Now
	}
	if c.Product == "" && c.Name != "product_not_configured" {
		c.Product = Product
	}
	b.set.Cases = append(b.set.Cases, c)
}

func (b *builder) ok(name, source, token string, kid string, mod func(*Case)) {
	c := Case{Name: name, Source: source, Token: token, Want: verifier.CodeOK, WantClaims: &Claims{
		KeyID: kid, Issuer: Issuer, Audience: Audience, User: User, Product: Product, ID: JTI,
		IssuedAt: IssuedAt, ExpiresAt: ExpiresAt,
	}}
	if mod != nil {
		mod(&c)
	}
	b.add(c)
}

func (b *builder) bad(name, source, token string, want verifier.Code, mod func(*Case)) {
	c := Case{Name: name, Source: source, Token: token, Want: want}
	if mod != nil {
		mod(&c)
	}
	b.add(c)
}

// jwk is one member of the published JWK Set.
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
}

// Build returns the deterministic case table.
func Build() (*Set, error) {
	s := &Set{
		Issuer: Issuer, Audience: Audience,
		Current: Key("current"), Previous: Key("previous"), Rogue: Key("rogue"),
	}
	pub := func(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }
	s.CurrentKID, s.PreviousKID, s.RogueKID = Thumbprint(pub(s.Current)), Thumbprint(pub(s.Previous)), Thumbprint(pub(s.Rogue))
	jwks, err := json.Marshal(struct {
		Keys []jwk `json:"keys"`
	}{[]jwk{
		{"OKP", "Ed25519", b64.EncodeToString(pub(s.Current)), s.CurrentKID, "sig", "EdDSA"},
		{"OKP", "Ed25519", b64.EncodeToString(pub(s.Previous)), s.PreviousKID, "sig", "EdDSA"},
	}})
	if err != nil {
		return nil, err
	}
	s.JWKS = jwks
	b := &builder{set: s}
	cur, kid := s.Current, s.CurrentKID
	H := header(kid).String()
	C := claims().String()
	valid := Sign(cur, H, C)
	s.Valid = valid
	segs := strings.Split(valid, ".")
	hSeg, pSeg, sigSeg := segs[0], segs[1], segs[2]
	signC := func(c obj) string { return Sign(cur, H, c.String()) }
	signH := func(h obj) string { return Sign(cur, h.String(), C) }

	// ---- accepted tokens ----------------------------------------------------
	// The issuer's token shape (docs/DESIGN.md#tokens).
	b.ok("valid", "docs/DESIGN.md Tokens", valid, kid, nil)
	// Signed by jwx as an independent implementation (header member order and
	// encoding chosen by jwx, not by us).
	jwxTok, err := jwxSign(cur, kid, C)
	if err != nil {
		return nil, err
	}
	b.ok("valid_jwx_signed", "lestrrat-go/jwx v2 jws.Sign", jwxTok, kid, nil)
	// Key rotation: the retired key stays published until its tokens expire.
	b.ok("valid_previous_key", "docs/DESIGN.md keys/ rotation", Sign(s.Previous, header(s.PreviousKID).String(), C), s.PreviousKID, nil)
	b.ok("valid_user_checked", "docs/DESIGN.md Verifier rules: user where the caller knows it", valid, kid,
		func(c *Case) { c.User = User })
	b.ok("valid_now_eq_iat", "RFC 7519 §4.1.6", valid, kid, func(c *Case) { c.Now = IssuedAt })
	b.ok("valid_now_exp_minus_1", "RFC 7519 §4.1.4: exp is the first instant of rejection", valid, kid,
		func(c *Case) { c.Now = ExpiresAt - 1 })
	b.ok("valid_exp_within_leeway", "RFC 7519 §4.1.4 leeway", valid, kid,
		func(c *Case) { c.Now = ExpiresAt + 29; c.Leeway = 30 })
	b.ok("valid_iat_within_leeway", "RFC 7519 §4.1.6 leeway", valid, kid,
		func(c *Case) { c.Now = IssuedAt - 30; c.Leeway = 30 })
	b.ok("valid_nbf_past", "RFC 7519 §4.1.5", signC(claims().with("nbf", num(IssuedAt))), kid, nil)
	b.ok("valid_nbf_within_leeway", "RFC 7519 §4.1.5 leeway", signC(claims().with("nbf", num(Now+30))), kid,
		func(c *Case) { c.Leeway = 30 })
	b.ok("valid_lifetime_max", "docs/DESIGN.md exp − iat ≤ max lifetime",
		signC(claims().with("exp", num(IssuedAt+MaxLifetime))), kid,
		func(c *Case) { c.WantClaims.ExpiresAt = IssuedAt + MaxLifetime })
	b.ok("valid_unknown_header_ignored", "RFC 7515 §4: unknown header parameters are ignored",
		signH(header(kid).with("cty", q("JWT")).with("x-trace", `{"a":[1,2,{"b":null}]}`)), kid, nil)
	b.ok("valid_extra_claims_ignored", "RFC 7519 §4.3 private claims",
		signC(claims().with("scope", q("buy")).with("n", "1.5e3")), kid, nil)
	// RFC 7515 A.1 uses CRLF and spaces inside the JSON: insignificant whitespace.
	b.ok("valid_json_whitespace", "RFC 7515 A.1 (CRLF inside header/payload JSON)",
		Sign(cur, "{\"alg\":\"EdDSA\",\r\n \"kid\":"+q(kid)+",\r\n \"typ\":\""+verifier.TokenType+"\"}",
			"\r\n { \"iss\" : "+q(Issuer)+" ,\n\t\"aud\":"+q(Audience)+",\"sub\":"+q(User)+",\"product\":"+q(Product)+
				",\"jti\":"+q(JTI)+",\"iat\":"+num(IssuedAt)+",\"exp\":"+num(ExpiresAt)+"} "), kid, nil)
	// JSON escapes denote the same strings (RFC 8259 §7).
	b.ok("valid_json_escapes", "RFC 8259 §7 string escapes",
		Sign(cur, `{"alg":"EdD\u0053A","kid":`+q(kid)+`,"typ":"flashgate-admission\u002bjwt"}`,
			claims().with("sub", `"user-\u00312345"`).with("iss", `"https:\/\/issuer.example"`).String()), kid, nil)
	b.ok("valid_exactly_4096_bytes", "docs/DESIGN.md size ≤ 4 KiB", sized(cur, kid, verifier.MaxTokenSize), kid, nil)

	// ---- 1. size --------------------------------------------------------------
	b.bad("too_large_4097", "docs/DESIGN.md size ≤ 4 KiB checked before decoding",
		sized(cur, kid, verifier.MaxTokenSize+1), verifier.CodeTooLarge, nil)
	b.bad("too_large_dot_flood", "DoS: segment splitting of a huge input (cf. CVE-2025-30204)",
		strings.Repeat(".", 100000), verifier.CodeTooLarge, nil)
	b.bad("too_large_1mib_garbage", "DoS: decoding before size check", strings.Repeat("A", 1<<20), verifier.CodeTooLarge, nil)

	// ---- 2. compact shape -------------------------------------------------------
	mal := func(name, source, tok string) { b.bad(name, source, tok, verifier.CodeMalformed, nil) }
	mal("empty", "RFC 7515 §7.1", "")
	mal("dot_flood_small", "CVE-2025-30204 idea (many separators)", strings.Repeat(".", 4000))
	mal("two_segments", "RFC 7515 §7.1 / Wycheproof", hSeg+"."+pSeg)
	mal("four_segments", "RFC 7516 JWE has five; JWS exactly three", valid+"."+sigSeg)
	mal("five_segments_jwe_like", "RFC 7516 §7.1", hSeg+"."+pSeg+"."+pSeg+"."+pSeg+"."+sigSeg)
	mal("trailing_dot", "RFC 7515 §7.1", valid+".")
	mal("empty_header", "RFC 7515 §7.1", "."+pSeg+"."+sigSeg)
	mal("empty_payload", "RFC 7515 §7.1 (detached payload, Appendix F, not accepted)", hSeg+".."+sigSeg)
	mal("empty_signature", "RFC 7515 A.5 unsecured form", hSeg+"."+pSeg+".")
	mal("alg_none_empty_signature", "RFC 7515 A.5 / RFC 8725 §3.1",
		b64.EncodeToString([]byte(header(kid).with("alg", q("none")).String()))+"."+pSeg+".")
	mal("leading_space", "strict compact form", " "+valid)
	mal("trailing_space", "strict compact form", valid+" ")
	mal("trailing_newline", "strict compact form (encoding/base64 skips \\n)", valid+"\n")
	mal("newline_inside_payload", "encoding/base64 silently skips \\r\\n",
		SignSegments(cur, hSeg, pSeg[:10]+"\n"+pSeg[10:]))
	mal("padding_header", "RFC 7515 §2 base64url without padding / Wycheproof", paddedToken(cur, kid))
	mal("padding_signature", "RFC 7515 §2", valid+"==")
	mal("std_alphabet_plus", "RFC 4648 §4 vs §5 alphabet", stdAlphabetToken(cur, C, '+'))
	mal("std_alphabet_slash", "RFC 4648 §4 vs §5 alphabet", stdAlphabetToken(cur, C, '/'))
	mal("header_trailing_bits", "RFC 4648 §3.5 canonical encoding / Wycheproof tc375 idea", trailingBitsHeader(cur, kid))
	mal("payload_trailing_bits", "RFC 4648 §3.5; signature valid over the raw segments", trailingBitsPayload(cur, H))
	mal("header_length_mod4_eq_1", "RFC 4648: impossible length", SignSegments(cur, hSeg+"A", pSeg))
	mal("json_serialization", "RFC 7515 §7.2 (compact only; Wycheproof tc17)",
		`{"payload":"`+pSeg+`","signatures":[{"protected":"`+hSeg+`","signature":"`+sigSeg+`"}]}`)
	mal("flattened_json_serialization", "RFC 7515 §7.2.2",
		`{"payload":"`+pSeg+`","protected":"`+hSeg+`","signature":"`+sigSeg+`"}`)
	mal("raw_json", "not a JWS", C)
	mal("waiting_token", "docs/DESIGN.md: a waiting token can never pass as an admission token", "fgw2_AbCd_hoeiiktxjt_42_AAAAAAAAAAAAAAAAAAAAAA")
	mal("bearer_prefix_kept", "caller bug: scheme not stripped", "Bearer "+valid)
	mal("header_not_object", "RFC 7515 §4: header is a JSON object", Sign(cur, `["EdDSA"]`, C))
	mal("header_not_json", "RFC 7515 §5.2 step 3", Sign(cur, `alg=EdDSA`, C))
	mal("header_trailing_garbage", "RFC 8259 one JSON text", Sign(cur, H+"x", C))
	mal("header_two_objects", "RFC 8259 one JSON text", Sign(cur, H+H, C))
	mal("header_trailing_comma", "RFC 8259 grammar", Sign(cur, H[:len(H)-1]+",}", C))
	mal("header_single_quotes", "RFC 8259 grammar", Sign(cur, strings.ReplaceAll(H, `"`, `'`), C))
	mal("header_bom", "RFC 8259 §8.1: no BOM", Sign(cur, "\uFEFF"+H, C))
	mal("header_invalid_utf8", "RFC 7493 §2.1", Sign(cur, header(kid).with("x", "\"\xff\"").String(), C))
	mal("header_lone_surrogate", "RFC 7493 §2.1", Sign(cur, header(kid).with("x", `"\ud800"`).String(), C))
	mal("header_control_char", "RFC 8259 §7", Sign(cur, header(kid).with("x", "\"a\x01\"").String(), C))
	mal("header_deep_nesting", "parser DoS (stack depth)",
		Sign(cur, header(kid).with("x", strings.Repeat("[", 1000)+strings.Repeat("]", 1000)).String(), C))
	mal("payload_not_object", "RFC 7519 §7.2 step 10", Sign(cur, H, `"claims"`))
	mal("payload_not_json", "RFC 8037 A.4-like payload", Sign(cur, H, "Example of Ed25519 signing"))
	mal("payload_trailing_garbage", "RFC 8259", Sign(cur, H, C+"]"))
	mal("payload_leading_zero", "RFC 8259 §6 number grammar", signC(claims().with("exp", "01763680300")))
	mal("payload_nan", "RFC 8259 §6", signC(claims().with("exp", "NaN")))

	// ---- 3. duplicates --------------------------------------------------------
	dup := func(name, source, tok string) { b.bad(name, source, tok, verifier.CodeDuplicateKey, nil) }
	dup("duplicate_alg", "RFC 7515 §5.2 step 4 / RFC 8725 §3.1", signH(header(kid).plus("alg", q("none"))))
	dup("duplicate_alg_escaped", "duplicate detection after unescaping", signH(header(kid).plus(`\u0061lg`, q("none"))))
	dup("duplicate_kid", "RFC 7515 §5.2 step 4", signH(header(kid).plus("kid", q(s.PreviousKID))))
	dup("duplicate_exp", "RFC 7519 §4 / parser differential", signC(claims().plus("exp", num(ExpiresAt+100000))))
	dup("duplicate_sub", "RFC 7519 §4 / parser differential (user confusion)", signC(claims().plus("sub", q("admin"))))
	dup("duplicate_nested", "RFC 7493 §2.3 in nested objects", signH(header(kid).with("x", `{"a":1,"a":2}`)))
	dup("duplicate_header_forged", "header duplicates are found before the signature is checked",
		Sign(s.Rogue, header(kid).plus("typ", q("JWT")).String(), C))

	// ---- 4. alg ---------------------------------------------------------------
	alg := func(name, source, tok string) { b.bad(name, source, tok, verifier.CodeUnsupportedAlg, nil) }
	for _, a := range []string{"none", "None", "NONE", "nOnE"} {
		// Unsecured JWS carrying a (valid EdDSA) signature so that the alg
		// check, not the empty-segment check, is what refuses it.
		alg("alg_"+a, "RFC 8725 §2.1/§3.1; CVE-2018-1000531, CVE-2022-23540; Wycheproof AlgIsNone",
			b64.EncodeToString([]byte(header(kid).with("alg", q(a)).String()))+"."+pSeg+"."+sigSeg)
	}
	pubRaw := []byte(pub(cur))
	der, _ := x509.MarshalPKIXPublicKey(pub(cur))
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	for _, k := range []struct {
		name, source string
		secret       []byte
	}{
		{"raw", "RFC 8725 §2.1 key confusion; CVE-2015-9235, CVE-2016-10555", pubRaw},
		{"jwk", "RFC 8725 §2.1 key confusion (JWKS bytes)", jwks},
		{"pem", "RFC 8725 §2.1; CVE-2016-5431 idea (PEM as HMAC secret)", pemBytes},
	} {
		h := header(kid).with("alg", q("HS256")).String()
		in := b64.EncodeToString([]byte(h)) + "." + pSeg
		mac := hmac.New(sha256.New, k.secret)
		mac.Write([]byte(in))
		alg("alg_hs256_public_key_"+k.name, k.source, in+"."+b64.EncodeToString(mac.Sum(nil)))
	}
	alg("alg_missing", "RFC 7515 §4.1.1 alg REQUIRED", signH(header(kid).without("alg")))
	alg("alg_not_string", "RFC 7515 §4.1.1", signH(header(kid).with("alg", "1")))
	alg("alg_null", "RFC 7515 §4.1.1", signH(header(kid).with("alg", "null")))
	alg("alg_array", "RFC 7515 §4.1.1", signH(header(kid).with("alg", `["EdDSA"]`)))
	alg("alg_lowercase", "RFC 7515 §4.1.1 case-sensitive", signH(header(kid).with("alg", q("eddsa"))))
	alg("alg_ed25519_fully_specified", "RFC 9864 names not (yet) accepted", signH(header(kid).with("alg", q("Ed25519"))))
	alg("alg_es256", "RFC 7518 §3.4 not our key type", signH(header(kid).with("alg", q("ES256"))))
	alg("alg_rs256", "RFC 7518 §3.3 not our key type", signH(header(kid).with("alg", q("RS256"))))

	// ---- 5. forbidden headers ---------------------------------------------------
	fb := func(name, source, tok string) { b.bad(name, source, tok, verifier.CodeForbiddenHeader, nil) }
	rogueJWK := `{"kty":"OKP","crv":"Ed25519","x":"` + b64.EncodeToString(pub(s.Rogue)) + `"}`
	fb("header_jwk_embedded_key", "RFC 7515 §4.1.3; CVE-2018-0114 idea; Wycheproof tc32",
		Sign(s.Rogue, header(kid).with("jwk", rogueJWK).String(), C))
	fb("header_jwk_null", "any value counts", signH(header(kid).with("jwk", "null")))
	fb("header_jku", "RFC 7515 §4.1.2 (SSRF / key injection)", signH(header(kid).with("jku", q("https://evil.example/jwks.json"))))
	fb("header_x5u", "RFC 7515 §4.1.5", signH(header(kid).with("x5u", q("https://evil.example/cert.pem"))))
	fb("header_x5c", "RFC 7515 §4.1.6", signH(header(kid).with("x5c", `["MIIB"]`)))
	fb("header_x5t", "RFC 7515 §4.1.7", signH(header(kid).with("x5t", q("AAAA"))))
	fb("header_x5t_s256", "RFC 7515 §4.1.8", signH(header(kid).with("x5t#S256", q("AAAA"))))
	fb("header_crit", "RFC 7515 §4.1.11: no extensions understood", signH(header(kid).with("crit", `["exp"]`)))
	fb("header_b64_false", "RFC 7797 unencoded payload", signH(header(kid).with("b64", "false")))
	fb("header_jku_escaped_name", "member names compared after unescaping", signH(header(kid).with(`j\u006bu`, q("https://evil.example"))))

	// ---- 6. typ -------------------------------------------------------------------
	typ := func(name, source, tok string) { b.bad(name, source, tok, verifier.CodeBadType, nil) }
	typ("typ_missing", "RFC 8725 §3.11 explicit typing", signH(header(kid).without("typ")))
	typ("typ_jwt", "RFC 8725 §3.11 (generic JWT substituted)", signH(header(kid).with("typ", q("JWT"))))
	typ("typ_uppercase", "exact comparison", signH(header(kid).with("typ", q("FLASHGATE-ADMISSION+JWT"))))
	typ("typ_application_prefix", "RFC 7515 §4.1.9 prefix form not accepted", signH(header(kid).with("typ", q("application/"+verifier.TokenType))))
	typ("typ_waiting", "docs/DESIGN.md waiting token has a different typ", signH(header(kid).with("typ", q("flashgate-waiting+jwt"))))
	typ("typ_not_string", "RFC 7515 §4.1.9", signH(header(kid).with("typ", "1")))

	// ---- 7. kid ----------------------------------------------------------------------
	uk := func(name, source, tok string) { b.bad(name, source, tok, verifier.CodeUnknownKey, nil) }
	uk("kid_missing", "docs/DESIGN.md kid must name a known key", signH(header(kid).without("kid")))
	uk("kid_empty", "kid injection", Sign(cur, header("").String(), C))
	uk("kid_path_traversal", "RFC 8725 §2.9/§3.10 kid injection (kid used as a file name)", Sign(cur, header("../../dev/null").String(), C))
	uk("kid_sql_injection", "kid injection", Sign(cur, header("x' UNION SELECT 'key").String(), C))
	uk("kid_300_bytes", "kid injection / DoS", Sign(cur, header(strings.Repeat("k", 300)).String(), C))
	uk("kid_numeric", "RFC 7515 §4.1.4 kid is a string", signH(header(kid).with("kid", "1")))
	uk("kid_null", "RFC 7515 §4.1.4", signH(header(kid).with("kid", "null")))
	uk("kid_unknown", "key not in the JWKS", Sign(s.Rogue, header(s.RogueKID).String(), C))

	// ---- 8. signature --------------------------------------------------------------
	sig := func(name, source, tok string) { b.bad(name, source, tok, verifier.CodeBadSignature, nil) }
	sigBytes, _ := b64.DecodeString(sigSeg)
	sig("sig_unknown_key_known_kid", "forgery with a known kid", Sign(s.Rogue, H, C))
	sig("sig_previous_key_current_kid", "kid/key mismatch", Sign(s.Previous, H, C))
	sig("sig_forged_and_expired", "docs/DESIGN.md: forged-and-expired reports the signature",
		Sign(s.Rogue, H, claims().with("exp", num(IssuedAt+10)).String()))
	sig("sig_forged_wrong_claims", "signature before claims",
		Sign(s.Rogue, H, claims().with("iss", q("https://evil.example")).with("product", q("sku-9")).String()))
	sig("sig_forged_payload_duplicate", "payload is read only after the signature verified",
		Sign(s.Rogue, H, claims().plus("sub", q("admin")).String()))
	sig("sig_63_bytes", "Wycheproof TruncatedSignature", hSeg+"."+pSeg+"."+b64.EncodeToString(sigBytes[:63]))
	sig("sig_65_bytes", "Wycheproof SignatureWithGarbage", hSeg+"."+pSeg+"."+b64.EncodeToString(append(append([]byte(nil), sigBytes...), 0)))
	sig("sig_all_zero", "Wycheproof / 'psychic signature' idea (CVE-2022-21449)", hSeg+"."+pSeg+"."+b64.EncodeToString(make([]byte, 64)))
	sig("sig_s_plus_l", "RFC 8032 §5.1.7 S < L; Wycheproof SignatureMalleability", hSeg+"."+pSeg+"."+b64.EncodeToString(malleate(sigBytes)))
	sig("sig_bit_flip", "integrity", hSeg+"."+pSeg+"."+b64.EncodeToString(flip(sigBytes, 10)))
	sig("sig_trailing_bits", "RFC 4648 §3.5: non-canonical encoding of the same 64 bytes", hSeg+"."+pSeg+"."+setTrailingBits(sigSeg))
	sig("sig_other_token", "signature transplant", hSeg+"."+b64.EncodeToString([]byte(claims().with("sub", q("admin")).String()))+"."+sigSeg)
	sig("sig_payload_modified", "integrity: product changed after signing",
		hSeg+"."+b64.EncodeToString([]byte(claims().with("product", q("sku-2")).String()))+"."+sigSeg)

	// ---- 10. claim types -------------------------------------------------------------
	ic := func(name, source, tok string) { b.bad(name, source, tok, verifier.CodeInvalidClaims, nil) }
	ic("exp_missing", "docs/DESIGN.md integer exp required", signC(claims().without("exp")))
	ic("exp_string", "RFC 7519 §2 NumericDate", signC(claims().with("exp", q(num(ExpiresAt)))))
	ic("exp_float", "integers only (1.0 refused)", signC(claims().with("exp", num(ExpiresAt)+".0")))
	ic("exp_exponent", "integers only (1e3 refused)", signC(claims().with("exp", "1.7636803e9")))
	ic("exp_negative", "0 < exp", signC(claims().with("exp", "-1")))
	ic("exp_zero", "0 < exp", signC(claims().with("exp", "0")))
	ic("exp_2_pow_53", "RFC 7493 §2.2 integer range", signC(claims().with("exp", "9007199254740992")))
	ic("exp_enormous", "integer overflow", signC(claims().with("exp", "99999999999999999999999999999")))
	ic("exp_null", "RFC 7519 §2", signC(claims().with("exp", "null")))
	ic("exp_not_after_iat", "exp > iat", signC(claims().with("exp", num(IssuedAt))))
	ic("iat_missing", "docs/DESIGN.md iat required", signC(claims().without("iat")))
	ic("iat_string", "RFC 7519 §2", signC(claims().with("iat", q(num(IssuedAt)))))
	ic("nbf_string", "RFC 7519 §4.1.5", signC(claims().with("nbf", q(num(IssuedAt)))))
	ic("nbf_float", "integers only", signC(claims().with("nbf", "1763680000.5")))
	ic("jti_missing", "docs/DESIGN.md jti = admission id (replay key)", signC(claims().without("jti")))
	ic("jti_empty", "jti non-empty", signC(claims().with("jti", q(""))))
	ic("jti_number", "RFC 7519 §4.1.7 jti is a string", signC(claims().with("jti", "1234")))

	// ---- 11. iss / aud / product / sub --------------------------------------------------
	bi := func(name, source, tok string) { b.bad(name, source, tok, verifier.CodeBadIssuer, nil) }
	bi("iss_wrong", "RFC 7519 §4.1.1", signC(claims().with("iss", q("https://evil.example"))))
	bi("iss_trailing_slash", "exact comparison", signC(claims().with("iss", q(Issuer+"/"))))
	bi("iss_missing", "RFC 7519 §4.1.1", signC(claims().without("iss")))
	bi("iss_not_string", "RFC 7519 §4.1.1", signC(claims().with("iss", "42")))
	bi("iss_array", "RFC 7519 §4.1.1", signC(claims().with("iss", `["`+Issuer+`"]`)))
	bi("iss_wrong_and_expired", "claim order: iss before time", signC(claims().with("iss", q("x")).with("exp", num(IssuedAt+1))))
	ba := func(name, source, tok string) { b.bad(name, source, tok, verifier.CodeBadAudience, nil) }
	ba("aud_array", "RFC 7519 §4.1.3 array form refused by profile", signC(claims().with("aud", `["orders"]`)))
	ba("aud_array_two", "RFC 7519 §4.1.3", signC(claims().with("aud", `["orders","admin"]`)))
	ba("aud_substring", "substring match bug", signC(claims().with("aud", q("order"))))
	ba("aud_superstring", "prefix match bug", signC(claims().with("aud", q("orders-admin"))))
	ba("aud_missing", "RFC 7519 §4.1.3", signC(claims().without("aud")))
	ba("aud_not_string", "RFC 7519 §4.1.3", signC(claims().with("aud", "1")))
	bp := func(name, source, tok string, mod func(*Case)) {
		b.bad(name, source, tok, verifier.CodeBadProduct, mod)
	}
	bp("product_wrong", "docs/DESIGN.md product claim", valid, func(c *Case) { c.Product = "sku-2" })
	bp("product_missing", "docs/DESIGN.md product claim", signC(claims().without("product")), nil)
	bp("product_not_string", "docs/DESIGN.md product claim", signC(claims().with("product", "1")), nil)
	bp("product_case", "exact comparison", signC(claims().with("product", q("SKU-1"))), nil)
	bp("product_not_configured", "fail closed: no expected product", valid, nil)
	bu := func(name, source, tok string, mod func(*Case)) { b.bad(name, source, tok, verifier.CodeBadUser, mod) }
	bu("user_wrong", "docs/DESIGN.md user where the caller knows it", valid, func(c *Case) { c.User = "user-99999" })
	bu("sub_missing", "RFC 7519 §4.1.2", signC(claims().without("sub")), nil)
	bu("sub_empty", "RFC 7519 §4.1.2", signC(claims().with("sub", q(""))), nil)
	bu("sub_not_string", "RFC 7519 §4.1.2", signC(claims().with("sub", "12345")), nil)

	// ---- 12. lifetime ----------------------------------------------------------------------
	b.bad("lifetime_too_long", "docs/DESIGN.md exp − iat ≤ max lifetime",
		signC(claims().with("exp", num(IssuedAt+MaxLifetime+1))), verifier.CodeLifetimeTooLong, nil)
	b.bad("lifetime_max_int", "exp = 2^53 − 1", signC(claims().with("exp", "9007199254740991")), verifier.CodeLifetimeTooLong, nil)

	// ---- 13. time ------------------------------------------------------------------------------
	b.bad("expired_now_eq_exp", "docs/DESIGN.md exp == now is expired", valid, verifier.CodeExpired,
		func(c *Case) { c.Now = ExpiresAt })
	b.bad("expired_long_ago", "RFC 7519 §4.1.4", valid, verifier.CodeExpired, func(c *Case) { c.Now = ExpiresAt + 86400 })
	b.bad("expired_leeway_edge", "now = exp + leeway is expired", valid, verifier.CodeExpired,
		func(c *Case) { c.Now = ExpiresAt + 30; c.Leeway = 30 })
	b.bad("expired_now_eq_exp_no_leeway", "leeway 0 vs 30", valid, verifier.CodeExpired,
		func(c *Case) { c.Now = ExpiresAt; c.Leeway = 0 })
	b.bad("iat_future", "RFC 7519 §4.1.6 issued in the future", valid, verifier.CodeNotYetValid,
		func(c *Case) { c.Now = IssuedAt - 1 })
	b.bad("iat_future_beyond_leeway", "leeway 30", valid, verifier.CodeNotYetValid,
		func(c *Case) { c.Now = IssuedAt - 31; c.Leeway = 30 })
	b.bad("nbf_future", "RFC 7519 §4.1.5", signC(claims().with("nbf", num(Now+1))), verifier.CodeNotYetValid, nil)
	b.bad("nbf_future_beyond_leeway", "RFC 7519 §4.1.5 leeway 30", signC(claims().with("nbf", num(Now+31))),
		verifier.CodeNotYetValid, func(c *Case) { c.Leeway = 30 })

	// The attack catalogue of docs/token-attacks.md (attacks.go).
	b.attacks(attackBase{
		s: s, cur: cur, kid: kid, H: H, C: C, valid: valid,
		hSeg: hSeg, pSeg: pSeg, sigSeg: sigSeg, sigBytes: sigBytes,
		signC: signC, signH: signH, pub: pub,
	})

	// Sanity: names are unique.
	seen := map[string]bool{}
	for _, c := range s.Cases {
		if seen[c.Name] {
			return nil, fmt.Errorf("tokencases: duplicate case name %q", c.Name)
		}
		seen[c.Name] = true
	}
	return s, nil
}

// jwxSign signs payload with jwx (an independent JWS implementation).
func jwxSign(key ed25519.PrivateKey, kid, payload string) (string, error) {
	h := jws.NewHeaders()
	if err := h.Set(jws.KeyIDKey, kid); err != nil {
		return "", err
	}
	if err := h.Set(jws.TypeKey, verifier.TokenType); err != nil {
		return "", err
	}
	out, err := jws.Sign([]byte(payload), jws.WithKey(jwa.EdDSA, key, jws.WithProtectedHeaders(h)))
	return string(out), err
}

// sized returns a valid token of exactly n bytes (padded with a private claim).
func sized(key ed25519.PrivateKey, kid string, n int) string {
	for hpad := 0; hpad < 4; hpad++ {
		h := strings.TrimSuffix(header(kid).String(), "}") + strings.Repeat(" ", hpad) + "}"
		base := len(Sign(key, h, claims().with("pad", q("")).String()))
		start := (n-base)*3/4 - 8
		if start < 0 {
			start = 0
		}
		for pad := start; pad < n; pad++ {
			t := Sign(key, h, claims().with("pad", q(strings.Repeat("x", pad))).String())
			if len(t) == n {
				return t
			}
			if len(t) > n {
				break
			}
		}
	}
	panic("tokencases: cannot build a token of the requested size")
}

// paddedToken encodes the header with '=' padding (needs len%3 != 0).
func paddedToken(key ed25519.PrivateKey, kid string) string {
	for pad := 0; ; pad++ {
		h := header(kid).with("p", q(strings.Repeat("x", pad))).String()
		if len(h)%3 != 0 {
			return SignSegments(key, base64.URLEncoding.EncodeToString([]byte(h)), b64.EncodeToString([]byte(claims().String())))
		}
	}
}

// stdAlphabetToken encodes the header with the standard alphabet so that it
// contains c ('+' or '/'), and signs the result.
func stdAlphabetToken(key ed25519.PrivateKey, payload string, c byte) string {
	kid := Thumbprint(key.Public().(ed25519.PublicKey))
	for i := 0; i < 10000; i++ {
		h := header(kid).with("p", `"`+strconv.Itoa(i)+`~?~"`).String()
		seg := base64.RawStdEncoding.EncodeToString([]byte(h))
		if strings.IndexByte(seg, c) >= 0 {
			return SignSegments(key, seg, b64.EncodeToString([]byte(payload)))
		}
	}
	panic("tokencases: no standard-alphabet header found")
}

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// setTrailingBits sets the lowest unused bit of the last symbol of an
// unpadded segment whose length is not a multiple of 4.
func setTrailingBits(seg string) string {
	if len(seg)%4 == 0 {
		panic("tokencases: no trailing bits")
	}
	last := strings.IndexByte(alphabet, seg[len(seg)-1])
	return seg[:len(seg)-1] + string(alphabet[last|1])
}

func trailingBitsHeader(key ed25519.PrivateKey, kid string) string {
	for pad := 0; ; pad++ {
		h := header(kid).with("p", q(strings.Repeat("x", pad))).String()
		if len(h)%3 != 0 {
			return SignSegments(key, setTrailingBits(b64.EncodeToString([]byte(h))), b64.EncodeToString([]byte(claims().String())))
		}
	}
}

func trailingBitsPayload(key ed25519.PrivateKey, h string) string {
	for pad := 0; ; pad++ {
		c := claims().with("p", q(strings.Repeat("x", pad))).String()
		if len(c)%3 != 0 {
			return SignSegments(key, b64.EncodeToString([]byte(h)), setTrailingBits(b64.EncodeToString([]byte(c))))
		}
	}
}

// groupOrder is L, the order of the Ed25519 base point (RFC 8032 §5.1).
var groupOrder, _ = new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)

// malleate returns R || (S + L): the same signature with a non-canonical S.
func malleate(sig []byte) []byte {
	s := make([]byte, 32)
	for i := range s { // little-endian → big-endian
		s[i] = sig[63-i]
	}
	n := new(big.Int).Add(new(big.Int).SetBytes(s), groupOrder)
	be := n.FillBytes(make([]byte, 32))
	out := append([]byte(nil), sig[:32]...)
	for i := 31; i >= 0; i-- {
		out = append(out, be[i])
	}
	return out
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 1
	return c
}
