package tokencases

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/pem"
	"hash"
	"math/big"
	"strings"

	"github.com/flashgate/flashgate/verifier"
)

// The attack catalogue of docs/token-attacks.md: cases added on top of the
// rule-by-rule table in Build, grouped by the numbered items of that
// document. Each case fails (native and wasm) if its defence is removed.
//
// Verbatim public vectors (RFC 7515 Appendix A, RFC 8037 A.4, C2SP
// Wycheproof json_web_signature_test.json) are copied from the RFCs and
// from verifier/testdata/wycheproof/json_web_signature_test.json; they
// carry no claims of ours and are refused before their claims are read.

// Verbatim public tokens.
const (
	// RFC 7515 A.1 (HS256; header and payload contain CRLF and spaces).
	rfc7515A1 = "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	// RFC 7515 A.2 (RS256).
	rfc7515A2 = "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ.cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw"
	// RFC 7515 A.3 (ES256, high-S) and its low-S twin (also a valid ECDSA signature).
	rfc7515A3         = "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ.DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q"
	rfc7515A3LowSSig  = "DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmU69fgrc8OPGycO0lD3tat_FoFp57SETepkeks4eL_QfA"
	rfc7515A4         = "eyJhbGciOiJFUzUxMiJ9.UGF5bG9hZA.AdwMgeerwtHoh-l192l60hp9wAHZFVJbLfD_UxMi70cwnZOYaRI1bKPWROc-mZZqwqT2SI-KGDKB34XO0aw_7XdtAG8GaSwFKdCAPZgoXD2YBJZCPEX3xKpRwcdOO8KpEHwJjyqOgzDO7iKvU8vcnwNrmxYbSW9ERBXukOXolLzeO_Jn"
	rfc7515A5         = "eyJhbGciOiJub25lIn0.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ."
	rfc8037A4         = "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc.hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg"
	wycheproofES256Hd = "eyJhbGciOiJFUzI1NiIsImtpZCI6ImtpZC1lYy1zaWduIn0.Zm9v." // {"alg":"ES256","kid":"kid-ec-sign"} . "foo" .
)

// Wycheproof json_web_signature_test.json (C2SP/wycheproof @ dac1dd47,
// testvectors_v1), verbatim, by tcId.
var wycheproofJWS = []struct {
	tc   int
	name string
	jws  string
	want verifier.Code
}{
	{16, "rejectsNoneAlgorithmAndMissingSignature", "eyJhbGciOiJub25lIiwia2lkIjoia2lkLWFlcy1zaWduIn0.Zm9v.", verifier.CodeMalformed},
	{17, "rejectsValidJsonSerialization", `{"payload":"Zm9v","signatures":[{"protected":"eyJhbGciOiJIUzI1NiIsImtpZCI6ImtpZC1hZXMtc2lnbiJ9","header":{"unknown":"untrustworthy"},"signature":"TD37p4c_0jmreSrBSDmE0F3mYSPtkZ3WrSyI5wb_KTg"}]}`, verifier.CodeMalformed},
	{31, "rejectsSymmetryConfusionAttacks", "eyJhbGciOiJIUzI1NiIsImtpZCI6ImtpZC1lYy1zaWduIn0.Zm9v.TgWtz2FIRukBQ_mA5sgHa0Ybtgn7bl-YBPAi7Z0XdHU", verifier.CodeUnsupportedAlg},
	{341, "algIsNone", "eyJhbGciOiJub25lIn0.MTIzNDAw.", verifier.CodeMalformed},
	{342, "algIsNone_NONE", "eyJhbGciOiJOT05FIn0.MTIzNDAw.", verifier.CodeMalformed},
	{343, "algIsNone_kid_none", "eyJhbGciOiJub25lIiwia2lkIjoibm9uZSJ9.MTIzNDAw.", verifier.CodeMalformed},
	{360, "rejectsSpacesInMac", "eyJraWQiOiJoczI1Ni1rZXkiLCJhbGciOiJIUzI1NiJ9.VGVzdA.    c1LROH7eNQwUT8KMVEO52VC3WZ9e_AnDWbZ7aMmowV8", verifier.CodeMalformed},
	{365, "spacesInHeader", "eyJraWQiOiJoczI1Ni1rZXkiLCJhbGciOiJIUzI1NiJ9    .VGVzdA.DR-cdw2cCB53b3mpzMfk2gKTeyN0PhXBrTW1atMfSdM", verifier.CodeMalformed},
	{372, "InvalidCharacterInsertedInHeader", "eyJraWQiOiJoczI1Ni1rZXkiLCJhbGciOiJIUzI1NiJ?9.VGVzdA.c1LROH7eNQwUT8KMVEO52VC3WZ9e_AnDWbZ7aMmowV8", verifier.CodeMalformed},
	{375, "MacOfIncorrectlyEncodedMessage", "eyJraWQiOiJoczI1Ni1rZXkiLCJhbGciOiJIUzI1NiJ9.AB.9phoKDvkBMAqTgeVIYeqAi6-lvC0pbKg9ER--3T97w0", verifier.CodeUnsupportedAlg},
	{378, "SpecialCaseEs256_valid", wycheproofES256Hd + "5cA0OHyMP7ezamUd5c9kV-FrGxdx4hbGXOdplQkutrppUShFwBW_Qj7IqhFOtNrIXLLKXS5CSZmERxmnjeyoiQ", verifier.CodeUnsupportedAlg},
	{379, "SpecialCaseEs256_SignatureTooLong", wycheproofES256Hd + "AOXANDh8jD-3s2plHeXPZFfhaxsXceIWxlznaZUJLra6AJau17k_6kC-wTdV7rFLJTdgNDBQeNVU629ysRtudnzI", verifier.CodeUnsupportedAlg},
	{381, "SpecialCaseEs256_RisTooBig", wycheproofES256Hd + "AeXANDd8jD-4s2plHeXPZFeeUhXFGPm1S1ChNFgFkdwLAJau17k_6kC-wTdV7rFLJTdgNDBQeNVU629ysRtudnzI", verifier.CodeUnsupportedAlg},
	{386, "SpecialCaseEs256_rIsZero_sIsZero", wycheproofES256Hd + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", verifier.CodeUnsupportedAlg},
	{389, "SpecialCaseEs256_rIsZero_sIsN", wycheproofES256Hd + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAD_____AAAAAP__________vOb6racXnoTzucrC_GMlUQ", verifier.CodeUnsupportedAlg},
	{401, "SpecialCaseEs256_rIsN_sIsN", wycheproofES256Hd + "_____wAAAAD__________7zm-q2nF56E87nKwvxjJVH_____AAAAAP__________vOb6racXnoTzucrC_GMlUQ", verifier.CodeUnsupportedAlg},
}

// p256N is the order of the P-256 base point (FIPS 186-4 D.1.2.3).
var p256N, _ = new(big.Int).SetString("FFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551", 16)

// attackBase is what the attack cases reuse from Build.
type attackBase struct {
	s                  *Set
	cur                ed25519.PrivateKey
	kid, H, C          string
	valid              string
	hSeg, pSeg, sigSeg string
	sigBytes           []byte
	signC              func(obj) string
	signH              func(obj) string
	pub                func(ed25519.PrivateKey) ed25519.PublicKey
}

func (b *builder) attacks(a attackBase) {
	s, cur, kid, H, C, valid := a.s, a.cur, a.kid, a.H, a.C, a.valid
	hSeg, pSeg, sigSeg, sigBytes := a.hSeg, a.pSeg, a.sigSeg, a.sigBytes
	signC, signH := a.signC, a.signH
	enc := func(s string) string { return b64.EncodeToString([]byte(s)) }
	bad := func(want verifier.Code) func(name, source, tok string) {
		return func(name, source, tok string) { b.bad(name, source, tok, want, nil) }
	}
	mal := bad(verifier.CodeMalformed)
	alg := bad(verifier.CodeUnsupportedAlg)
	fb := bad(verifier.CodeForbiddenHeader)
	typ := bad(verifier.CodeBadType)
	uk := bad(verifier.CodeUnknownKey)
	sig := bad(verifier.CodeBadSignature)
	dup := bad(verifier.CodeDuplicateKey)
	ic := bad(verifier.CodeInvalidClaims)
	bi := bad(verifier.CodeBadIssuer)
	ba := bad(verifier.CodeBadAudience)
	bp := bad(verifier.CodeBadProduct)
	bu := bad(verifier.CodeBadUser)
	tl := bad(verifier.CodeTooLarge)

	// ---- item 1: alg none in any casing -------------------------------------------------
	for _, n := range []string{"None", "NONE", "nOnE"} {
		mal("alg_"+n+"_empty_signature", "RFC 7515 A.5 / RFC 8725 §3.1 (CVE-2018-1000531): unsecured form, any casing",
			enc(header(kid).with("alg", q(n)).String())+"."+pSeg+".")
	}
	alg("alg_none_escaped", "RFC 8725 §3.1: none spelled with a JSON escape", signH(header(kid).with("alg", `"n\u006fne"`)))
	alg("alg_none_trailing_space", "RFC 8725 §3.1: near-miss of none", signH(header(kid).with("alg", q("none "))))
	alg("alg_none_only_header", "RFC 7515 A.5 header {\"alg\":\"none\"} with our claims and a real signature",
		SignSegments(cur, enc(`{"alg":"none"}`), pSeg))
	mal("rfc7515_a5_unsecured", "RFC 7515 Appendix A.5 verbatim", rfc7515A5)

	// ---- item 3: key confusion: HMAC keyed with the public key ---------------------------
	pubRaw := []byte(a.pub(cur))
	der, _ := x509.MarshalPKIXPublicKey(a.pub(cur))
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	member := `{"kty":"OKP","crv":"Ed25519","x":"` + b64.EncodeToString(pubRaw) + `","kid":"` + kid + `","use":"sig","alg":"EdDSA"}`
	thumbInput := `{"crv":"Ed25519","kty":"OKP","x":"` + b64.EncodeToString(pubRaw) + `"}`
	hmacTok := func(algName string, h func() hash.Hash, secret []byte) string {
		in := enc(header(kid).with("alg", q(algName)).String()) + "." + pSeg
		m := hmac.New(h, secret)
		m.Write([]byte(in))
		return in + "." + b64.EncodeToString(m.Sum(nil))
	}
	for _, k := range []struct {
		name, alg string
		h         func() hash.Hash
		secret    []byte
	}{
		{"alg_hs256_public_key_jwk_member", "HS256", sha256.New, []byte(member)},
		{"alg_hs256_public_key_jwk_thumbprint_form", "HS256", sha256.New, []byte(thumbInput)},
		{"alg_hs256_public_key_der", "HS256", sha256.New, der},
		{"alg_hs256_public_key_x_base64url", "HS256", sha256.New, []byte(b64.EncodeToString(pubRaw))},
		{"alg_hs256_public_key_pem_no_newline", "HS256", sha256.New, []byte(strings.TrimSuffix(string(pemBytes), "\n"))},
		{"alg_hs384_public_key_raw", "HS384", sha512.New384, pubRaw},
		{"alg_hs512_public_key_pem", "HS512", sha512.New, pemBytes},
	} {
		alg(k.name, "RFC 8725 §2.1/§3.1 key confusion; CVE-2015-9235, CVE-2016-10555, CVE-2016-5431", hmacTok(k.alg, k.h, k.secret))
	}
	// The same HMAC with the header still saying EdDSA: the signature layer
	// refuses a 32-byte "signature".
	{
		in := hSeg + "." + pSeg
		m := hmac.New(sha256.New, pubRaw)
		m.Write([]byte(in))
		sig("alg_eddsa_hmac_signature", "RFC 8725 §2.1: HMAC tag in an EdDSA token", in+"."+b64.EncodeToString(m.Sum(nil)))
	}

	// ---- item 4: unknown key, known kid -------------------------------------------------
	sig("sig_unknown_key_previous_kid", "forgery with the rotated key's kid", Sign(s.Rogue, header(s.PreviousKID).String(), C))
	sig("sig_current_key_previous_kid", "kid/key mismatch (the other published key)", Sign(cur, header(s.PreviousKID).String(), C))

	// ---- item 5: attacker-supplied key headers ------------------------------------------
	curJWK := `{"kty":"OKP","crv":"Ed25519","x":"` + b64.EncodeToString(pubRaw) + `"}`
	fb("header_jwk_current_key", "RFC 8725 §3.10: refused even when it names the real key", signH(header(kid).with("jwk", curJWK)))
	fb("header_jku_forged", "RFC 7515 §4.1.2; header checked before the signature",
		Sign(s.Rogue, header(kid).with("jku", q("https://evil.example/jwks.json")).String(), C))
	fb("header_jku_empty", "any value counts", signH(header(kid).with("jku", q(""))))
	fb("header_x5u_null", "any value counts", signH(header(kid).with("x5u", "null")))
	fb("header_x5c_empty", "RFC 7515 §4.1.6, any value counts", signH(header(kid).with("x5c", "[]")))
	fb("header_x5c_forged", "RFC 7515 §4.1.6 certificate chain from the token (CVE-2018-0114 class)",
		Sign(s.Rogue, header(kid).with("x5c", `["MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA"]`).String(), C))
	fb("header_x5u_escaped_name", "member names compared after unescaping", signH(header(kid).with(`x5\u0075`, q("https://evil.example"))))

	// ---- item 6: kid injection ----------------------------------------------------------
	uk("kid_129_bytes", "kid bound (128 bytes) + 1", Sign(cur, header(strings.Repeat("k", 129)).String(), C))
	uk("kid_128_bytes_unknown", "kid at the bound, unknown to the key set", Sign(cur, header(strings.Repeat("k", 128)).String(), C))
	uk("kid_2000_bytes", "overlong kid inside a 4 KiB token", Sign(cur, header(strings.Repeat("k", 2000)).String(), C))
	uk("kid_array", "RFC 7515 §4.1.4 kid is a string", signH(header(kid).with("kid", `["`+kid+`"]`)))
	uk("kid_object", "RFC 7515 §4.1.4", signH(header(kid).with("kid", `{"kid":"`+kid+`"}`)))
	uk("kid_bool", "RFC 7515 §4.1.4", signH(header(kid).with("kid", "true")))
	uk("kid_nul_suffix", "kid injection: C-string truncation", signH(header(kid).with("kid", `"`+kid+`\u0000"`)))
	uk("kid_trailing_space", "exact kid comparison", Sign(cur, header(kid+" ").String(), C))
	uk("kid_case_changed", "exact kid comparison", Sign(cur, header(toggleCase(kid)).String(), C))
	uk("kid_url", "kid injection (kid used as a URL)", Sign(cur, header("https://evil.example/jwks.json").String(), C))
	uk("kid_path_absolute", "kid injection (kid used as a file name)", Sign(cur, header("/etc/passwd").String(), C))
	uk("kid_dev_null_forged", "RFC 8725 §3.10: kid naming an empty file (HMAC with an empty key), forged signature",
		Sign(s.Rogue, header("../../../../../../dev/null").String(), C))

	// ---- item 7: signature length / zero signatures / ES256 -----------------------------
	sig("sig_1_byte", "Wycheproof TruncatedSignature", hSeg+"."+pSeg+"."+b64.EncodeToString(sigBytes[:1]))
	sig("sig_32_bytes", "Wycheproof TruncatedSignature (R only)", hSeg+"."+pSeg+"."+b64.EncodeToString(sigBytes[:32]))
	sig("sig_128_bytes", "Wycheproof SignatureWithGarbage (doubled)", hSeg+"."+pSeg+"."+b64.EncodeToString(append(append([]byte(nil), sigBytes...), sigBytes...)))
	sig("sig_all_ones", "S ≥ L, R not a point", hSeg+"."+pSeg+"."+b64.EncodeToString(fill(64, 0xff)))
	identity := make([]byte, 64)
	identity[0] = 1 // R = the identity point (small order), S = 0
	sig("sig_identity_r_zero_s", "RFC 8032 §5.1.7; small-order R", hSeg+"."+pSeg+"."+b64.EncodeToString(identity))
	sig("sig_r_zero_valid_s", "R replaced by zeros", hSeg+"."+pSeg+"."+b64.EncodeToString(append(make([]byte, 32), sigBytes[32:]...)))
	sig("sig_all_zero_forged_expired", "all-zero signature on expired claims reports the signature",
		enc(H)+"."+enc(claims().with("exp", num(IssuedAt+10)).String())+"."+b64.EncodeToString(make([]byte, 64)))

	es256H := enc(header(kid).with("alg", q("ES256")).String())
	es256 := func(name, source string, sigRaw []byte) {
		alg(name, source, es256H+"."+pSeg+"."+b64.EncodeToString(sigRaw))
	}
	rs := func(r, s *big.Int) []byte {
		out := make([]byte, 64)
		r.FillBytes(out[:32])
		s.FillBytes(out[32:])
		return out
	}
	one, zero := big.NewInt(1), big.NewInt(0)
	nPlus1 := new(big.Int).Add(p256N, one)
	a3 := strings.Split(rfc7515A3, ".")[2]
	a3sig, _ := b64.DecodeString(a3)
	r3, s3 := new(big.Int).SetBytes(a3sig[:32]), new(big.Int).SetBytes(a3sig[32:])
	derSig, _ := asn1.Marshal(struct{ R, S *big.Int }{r3, s3})
	es256("es256_r_zero_s_zero", "Wycheproof SpecialCaseEs256 tc386; CVE-2022-21449 (psychic signatures)", rs(zero, zero))
	es256("es256_r_zero_s_one", "Wycheproof SpecialCaseEs256 tc387", rs(zero, one))
	es256("es256_r_one_s_zero", "Wycheproof SpecialCaseEs256 tc390", rs(one, zero))
	es256("es256_r_eq_n", "Wycheproof SpecialCaseEs256 tc399 (r = n)", rs(p256N, one))
	es256("es256_s_eq_n", "Wycheproof SpecialCaseEs256 tc389 (s = n)", rs(one, p256N))
	es256("es256_r_s_eq_n", "Wycheproof SpecialCaseEs256 tc401", rs(p256N, p256N))
	es256("es256_s_gt_n", "Wycheproof SpecialCaseEs256 SisTooBig (s = n + 1)", rs(one, nPlus1))
	es256("es256_r_s_max", "r, s = 2^256 − 1 ≥ n", fill(64, 0xff))
	es256("es256_der_signature", "RFC 7518 §3.4: JWS ECDSA is R‖S, never DER (Wycheproof ecdsa DER file)", derSig)
	es256("es256_too_long", "Wycheproof SpecialCaseEs256 tc379 SignatureTooLong", append(append([]byte{0}, a3sig[:32]...), append([]byte{0}, a3sig[32:]...)...))
	es256("es256_real_signature_bytes", "RFC 7515 A.3 signature bytes under our header", a3sig)
	alg("es256_rfc7515_a3_high_s", "RFC 7515 Appendix A.3 verbatim (valid ES256, high S)", rfc7515A3)
	alg("es256_rfc7515_a3_low_s_twin", "RFC 7515 A.3 low-S twin (ECDSA malleability)",
		rfc7515A3[:strings.LastIndexByte(rfc7515A3, '.')+1]+rfc7515A3LowSSig)
	alg("es512_rfc7515_a4", "RFC 7515 Appendix A.4 verbatim", rfc7515A4)
	alg("hs256_rfc7515_a1", "RFC 7515 Appendix A.1 verbatim", rfc7515A1)
	alg("rs256_rfc7515_a2", "RFC 7515 Appendix A.2 verbatim", rfc7515A2)
	alg("ps256_our_claims", "RFC 7518 §3.5 not our key type", signH(header(kid).with("alg", q("PS256"))))

	// ---- item 8: malleated signature ------------------------------------------------------
	sig("sig_s_plus_2l", "RFC 8032 §5.1.7 S < L; Wycheproof SignatureMalleability", hSeg+"."+pSeg+"."+b64.EncodeToString(malleateBy(sigBytes, 2)))
	sig("sig_s_eq_l", "RFC 8032 §5.1.7 S < L (S = L)", hSeg+"."+pSeg+"."+b64.EncodeToString(sEqualsL(sigBytes)))
	hi := append([]byte(nil), sigBytes...)
	hi[63] |= 0x80
	sig("sig_s_high_bit", "RFC 8032 §5.1.7: top bits of S set", hSeg+"."+pSeg+"."+b64.EncodeToString(hi))

	// ---- item 9: crit and b64 -------------------------------------------------------------
	fb("header_crit_empty", "RFC 7515 §4.1.11 (an empty list is itself invalid); any value refused", signH(header(kid).with("crit", "[]")))
	fb("header_crit_null", "any value refused", signH(header(kid).with("crit", "null")))
	fb("header_crit_b64", "RFC 7797 §6: crit [\"b64\"] with b64 false", signH(header(kid).with("b64", "false").with("crit", `["b64"]`)))
	fb("header_crit_unknown_extension", "RFC 7515 §4.1.11: extension not understood", signH(header(kid).with("x-ext", "1").with("crit", `["x-ext"]`)))
	fb("header_crit_escaped_name", "member names compared after unescaping", signH(header(kid).with(`\u0063rit`, `["exp"]`)))
	fb("header_b64_true", "RFC 7797: b64 present at all is refused", signH(header(kid).with("b64", "true")))
	fb("header_b64_forged", "b64 checked before the signature", Sign(s.Rogue, header(kid).with("b64", "false").String(), C))

	// ---- item 10: non-canonical base64url -----------------------------------------------------
	mal("padding_payload", "RFC 7515 §2 base64url without padding", paddedPayload(cur, H))
	mal("padding_single_equals_signature", "RFC 7515 §2", valid+"=")
	mal("percent_encoded_padding", "RFC 7515 §2 (URL-encoded '=')", valid+"%3D")
	mal("std_alphabet_in_signature", "RFC 4648 §4 vs §5 alphabet in the signature", hSeg+"."+pSeg+".+"+sigSeg[1:])
	mal("space_inside_header", "whitespace inside a segment", hSeg[:10]+" "+hSeg[10:]+"."+pSeg+"."+sigSeg)
	mal("tab_inside_signature", "whitespace inside a segment", hSeg+"."+pSeg+"."+sigSeg[:20]+"\t"+sigSeg[20:])
	mal("crlf_inside_header", "encoding/base64 silently skips \\r\\n", SignSegments(cur, hSeg[:8]+"\r\n"+hSeg[8:], pSeg))
	mal("payload_length_mod4_eq_1", "RFC 4648: impossible length", SignSegments(cur, hSeg, pSeg+"A"))
	mal("nul_inside_payload", "NUL byte inside a segment", hSeg+"."+pSeg[:5]+"\x00"+pSeg[5:]+"."+sigSeg)

	// ---- item 11: serializations and surrounding characters -------------------------------------
	mal("leading_newline", "strict compact form", "\n"+valid)
	mal("trailing_crlf", "strict compact form", valid+"\r\n")
	mal("trailing_tab", "strict compact form", valid+"\t")
	mal("trailing_nul", "strict compact form (C-string)", valid+"\x00")
	mal("leading_bom", "strict compact form (UTF-8 BOM)", "\xEF\xBB\xBF"+valid)
	mal("quoted_token", "caller bug: JSON string passed as is", `"`+valid+`"`)
	mal("two_tokens_comma", "header folding: two tokens", valid+","+valid)
	mal("two_tokens_space", "header folding: two tokens", valid+" "+valid)
	mal("cookie_style_prefix", "caller bug: name=value", "token="+valid)
	mal("bearer_lowercase_prefix", "caller bug: scheme not stripped", "bearer "+valid)
	mal("two_segments_header_signature", "RFC 7515 §7.1 exactly three segments", hSeg+"."+sigSeg)
	mal("four_segments_empty_middle", "RFC 7515 §7.1", hSeg+"."+pSeg+".."+sigSeg)
	mal("leading_dot", "RFC 7515 §7.1", "."+valid)
	mal("json_serialization_general", "RFC 7515 §7.2.1 general JSON serialization with header",
		`{"payload":"`+pSeg+`","signatures":[{"protected":"`+hSeg+`","header":{"kid":"`+kid+`"},"signature":"`+sigSeg+`"}]}`)

	// ---- item 12: raw unsigned JSON -------------------------------------------------------------
	mal("raw_json_header_dot_claims", "plain JSON segments, not base64url", H+"."+C+".")
	mal("raw_json_with_signature", "plain JSON segments with a real signature", H+"."+C+"."+sigSeg)
	mal("raw_claims_single_segment", "base64url claims alone", pSeg)
	mal("raw_json_array", "not a JWS", "["+C+"]")

	// ---- item 13: duplicate JSON keys -------------------------------------------------------------
	dup("duplicate_typ", "RFC 7515 §5.2 step 4", signH(header(kid).plus("typ", q(verifier.TokenType))))
	dup("duplicate_unknown_header", "RFC 7515 §5.2 step 4 (even for ignored members)", signH(header(kid).plus("x", "1").plus("x", "2")))
	dup("duplicate_exp_same_value", "RFC 7519 §4: any repetition, even equal", signC(claims().plus("exp", num(ExpiresAt))))
	dup("duplicate_iat", "RFC 7519 §4", signC(claims().plus("iat", num(IssuedAt-100000))))
	dup("duplicate_iss", "RFC 7519 §4", signC(claims().plus("iss", q("https://evil.example"))))
	dup("duplicate_aud", "RFC 7519 §4", signC(claims().plus("aud", q("admin"))))
	dup("duplicate_jti", "RFC 7519 §4 (replay key confusion)", signC(claims().plus("jti", q("other"))))
	dup("duplicate_product", "RFC 7519 §4 (product confusion)", signC(claims().plus("product", q("sku-2"))))
	dup("duplicate_sub_escaped", "duplicate detection after unescaping", signC(claims().plus(`s\u0075b`, q("admin"))))
	dup("duplicate_nested_claim", "RFC 7493 §2.3 in nested objects", signC(claims().with("scope", `[{"a":1,"a":2}]`)))

	// ---- item 14: size before anything else --------------------------------------------------------
	tl("too_large_1mib_dot_flood", "DoS: 1 MiB of separators (CVE-2025-30204 class)", strings.Repeat(".", 1<<20))
	tl("too_large_4097_dots", "DoS: separators just over the bound", strings.Repeat(".", verifier.MaxTokenSize+1))
	tl("too_large_bad_byte_first", "size is checked before the first byte is looked at", "!"+strings.Repeat("A", verifier.MaxTokenSize))
	tl("too_large_valid_prefix", "a valid token followed by padding to 1 MiB", valid+strings.Repeat("A", 1<<20))
	tl("too_large_1mib_json", "DoS: raw JSON bigger than the bound", `{"a":"`+strings.Repeat("x", 1<<20)+`"}`)

	// ---- item 15: time claims -----------------------------------------------------------------------
	ic("exp_true", "RFC 7519 §2 NumericDate", signC(claims().with("exp", "true")))
	ic("exp_array", "RFC 7519 §2 NumericDate", signC(claims().with("exp", "["+num(ExpiresAt)+"]")))
	ic("exp_object", "RFC 7519 §2 NumericDate", signC(claims().with("exp", `{"v":`+num(ExpiresAt)+`}`)))
	ic("exp_minus_zero", "0 < exp", signC(claims().with("exp", "-0")))
	ic("exp_negative_large", "0 < exp", signC(claims().with("exp", "-9007199254740991")))
	ic("exp_fraction", "integers only", signC(claims().with("exp", num(ExpiresAt)+".5")))
	ic("exp_exponent_upper", "integers only", signC(claims().with("exp", "1E10")))
	ic("exp_300_digits", "integer overflow", signC(claims().with("exp", "1"+strings.Repeat("0", 299))))
	ic("exp_int64_overflow", "integer overflow (2^63)", signC(claims().with("exp", "9223372036854775808")))
	ic("iat_float", "integers only", signC(claims().with("iat", num(IssuedAt)+".0")))
	ic("iat_negative", "0 < iat", signC(claims().with("iat", "-1")))
	ic("iat_null", "RFC 7519 §2", signC(claims().with("iat", "null")))
	ic("nbf_null", "RFC 7519 §4.1.5", signC(claims().with("nbf", "null")))
	ic("nbf_negative", "0 < nbf", signC(claims().with("nbf", "-1")))
	ic("exp_before_iat", "exp > iat", signC(claims().with("exp", num(IssuedAt-1))))
	b.bad("expired_max_leeway_edge", "docs/DESIGN.md leeway ≤ 60 s: now = exp + 60", valid, verifier.CodeExpired,
		func(c *Case) { c.Now = ExpiresAt + 60; c.Leeway = 60 })
	b.bad("iat_future_beyond_max_leeway", "RFC 7519 §4.1.6, leeway 60", valid, verifier.CodeNotYetValid,
		func(c *Case) { c.Now = IssuedAt - 61; c.Leeway = 60 })
	b.bad("nbf_future_beyond_max_leeway", "RFC 7519 §4.1.5, leeway 60", signC(claims().with("nbf", num(Now+61))),
		verifier.CodeNotYetValid, func(c *Case) { c.Leeway = 60 })
	b.bad("nbf_far_future", "RFC 7519 §4.1.5", signC(claims().with("nbf", num(ExpiresAt-1))), verifier.CodeNotYetValid, nil)
	b.bad("lifetime_one_day", "docs/DESIGN.md exp − iat ≤ max lifetime", signC(claims().with("exp", num(IssuedAt+86400))),
		verifier.CodeLifetimeTooLong, nil)
	b.bad("lifetime_too_long_iat_back_dated", "iat moved back to stretch a short exp",
		signC(claims().with("iat", num(ExpiresAt-MaxLifetime-1))), verifier.CodeLifetimeTooLong, nil)

	// ---- item 16: typ / iss / aud / sub ----------------------------------------------------------------
	typ("typ_empty", "RFC 8725 §3.11", signH(header(kid).with("typ", q(""))))
	typ("typ_null", "RFC 8725 §3.11", signH(header(kid).with("typ", "null")))
	typ("typ_array", "RFC 7515 §4.1.9", signH(header(kid).with("typ", `["`+verifier.TokenType+`"]`)))
	typ("typ_trailing_space", "exact comparison", signH(header(kid).with("typ", q(verifier.TokenType+" "))))
	typ("typ_prefix", "exact comparison (substring)", signH(header(kid).with("typ", q("flashgate-admission"))))
	typ("typ_at_jwt", "RFC 9068 access token substituted", signH(header(kid).with("typ", q("at+jwt"))))
	typ("typ_jose", "RFC 7515 §4.1.9 JOSE", signH(header(kid).with("typ", q("JOSE"))))
	bi("iss_null", "RFC 7519 §4.1.1", signC(claims().with("iss", "null")))
	bi("iss_empty", "RFC 7519 §4.1.1", signC(claims().with("iss", q(""))))
	bi("iss_prefix", "substring match bug", signC(claims().with("iss", q(Issuer[:len(Issuer)-1]))))
	bi("iss_superstring", "prefix match bug", signC(claims().with("iss", q(Issuer+".evil"))))
	bi("iss_case", "exact comparison", signC(claims().with("iss", q(strings.ToUpper(Issuer)))))
	bi("iss_object", "RFC 7519 §4.1.1", signC(claims().with("iss", `{"iss":"`+Issuer+`"}`)))
	ba("aud_null", "RFC 7519 §4.1.3", signC(claims().with("aud", "null")))
	ba("aud_empty_string", "RFC 7519 §4.1.3", signC(claims().with("aud", q(""))))
	ba("aud_empty_array", "RFC 7519 §4.1.3", signC(claims().with("aud", "[]")))
	ba("aud_array_other_first", "RFC 7519 §4.1.3 array form", signC(claims().with("aud", `["admin","orders"]`)))
	ba("aud_case", "exact comparison", signC(claims().with("aud", q("Orders"))))
	ba("aud_comma_list", "substring / split bug", signC(claims().with("aud", q("orders,admin"))))
	ba("aud_object", "RFC 7519 §4.1.3", signC(claims().with("aud", `{"aud":"orders"}`)))
	bu("sub_null", "RFC 7519 §4.1.2", signC(claims().with("sub", "null")))
	bu("sub_array", "RFC 7519 §4.1.2", signC(claims().with("sub", `["`+User+`"]`)))
	bu("sub_object", "RFC 7519 §4.1.2", signC(claims().with("sub", `{"sub":"`+User+`"}`)))
	bu("sub_bool", "RFC 7519 §4.1.2", signC(claims().with("sub", "true")))

	// ---- item 17: another product, another user ---------------------------------------------------------
	bp("product_other_token", "docs/DESIGN.md product claim: a valid token minted for sku-2",
		signC(claims().with("product", q("sku-2"))))
	bp("product_prefix", "exact comparison (sku-10 vs sku-1)", signC(claims().with("product", q(Product+"0"))))
	bp("product_array", "docs/DESIGN.md product claim is a string", signC(claims().with("product", `["`+Product+`"]`)))
	b.bad("user_other_token", "docs/DESIGN.md user where the caller knows it: a valid token minted for another user",
		signC(claims().with("sub", q("user-99999"))), verifier.CodeBadUser, func(c *Case) { c.User = User })
	b.bad("user_prefix", "exact comparison (user-1234 vs user-12345)", signC(claims().with("sub", q(User[:len(User)-1]))),
		verifier.CodeBadUser, func(c *Case) { c.User = User })
	b.bad("user_case", "exact comparison", signC(claims().with("sub", q(strings.ToUpper(User)))),
		verifier.CodeBadUser, func(c *Case) { c.User = User })

	// ---- item 18: waiting tokens -------------------------------------------------------------------------
	mal("waiting_token_real_format", "docs/DESIGN.md / issuer/waiting.go shape fgw2_<sid>_<epoch>_<seq>_<base64url HMAC-SHA256[:16]>: no dots",
		"fgw2_AbCd_hoeiiktxjt_1_"+b64.EncodeToString(hmacSum([]byte("0123456789abcdef0123456789abcdef"), "fgw2:sku-1:user-12345:hoeiiktxjt:1")[:16]))
	mal("waiting_token_max_length", "issuer.MaxWaitingTokenLen = 80", "fgw2_AbCd_"+strings.Repeat("z", 13)+"_"+strings.Repeat("9", 19)+"_"+strings.Repeat("A", 36))
	mal("waiting_token_dotted", "waiting token reshaped into three segments", "fgw2.42.AAAAAAAAAAAAAAAAAAAAAA")
	alg("waiting_token_as_hs256_jwt", "docs/DESIGN.md: a waiting token is never an admission token (HMAC-keyed)",
		hmacTok("HS256", sha256.New, []byte("0123456789abcdef0123456789abcdef")))
	typ("typ_waiting_signed_by_issuer", "docs/DESIGN.md: different typ even under the admission key",
		Sign(cur, header(kid).with("typ", q("flashgate-waiting+jwt")).String(), claims().without("jti").String()))

	// ---- item 19: forged and otherwise bad: the signature is what is reported -------------------------------
	sig("sig_forged_and_not_yet_valid", "docs/DESIGN.md: signature before time", Sign(s.Rogue, H, claims().with("nbf", num(ExpiresAt-1)).String()))
	sig("sig_forged_lifetime_too_long", "docs/DESIGN.md: signature before lifetime", Sign(s.Rogue, H, claims().with("exp", num(IssuedAt+86400)).String()))
	sig("sig_forged_invalid_claims", "docs/DESIGN.md: signature before claim types", Sign(s.Rogue, H, claims().with("exp", q("never")).String()))
	sig("sig_forged_payload_not_json", "docs/DESIGN.md: payload read only after the signature", Sign(s.Rogue, H, "not json"))
	sig("sig_forged_payload_bad_base64", "payload decoded only after the signature",
		trailingBitsPayload(s.Rogue, H))
	b.bad("sig_forged_and_expired_long_ago", "docs/DESIGN.md: forged-and-expired reports the signature",
		Sign(s.Rogue, H, C), verifier.CodeBadSignature, func(c *Case) { c.Now = ExpiresAt + 86400 })
	b.bad("sig_malleated_and_expired", "malleated signature on an expired token: signature reported",
		hSeg+"."+pSeg+"."+b64.EncodeToString(malleate(sigBytes)), verifier.CodeBadSignature,
		func(c *Case) { c.Now = ExpiresAt + 1 })
	b.bad("sig_truncated_and_wrong_product", "signature before product", hSeg+"."+pSeg+"."+b64.EncodeToString(sigBytes[:63]),
		verifier.CodeBadSignature, func(c *Case) { c.Product = "sku-2" })
	b.bad("sig_forged_wrong_user", "signature before user", Sign(s.Rogue, H, C), verifier.CodeBadSignature,
		func(c *Case) { c.User = "user-99999" })

	// ---- public vectors, verbatim ------------------------------------------------------------------------------
	typ("rfc8037_a4_full_verify", "RFC 8037 A.4 verbatim: valid EdDSA signature, but no typ (and no kid, payload not JSON)", rfc8037A4)
	for _, w := range wycheproofJWS {
		b.bad("wycheproof_jws_tc"+itoa(w.tc)+"_"+w.name, "Wycheproof json_web_signature_test.json tcId "+itoa(w.tc), w.jws, w.want, nil)
	}
}

func itoa(n int) string { return num(int64(n)) }

func fill(n int, v byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = v
	}
	return b
}

func hmacSum(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// toggleCase flips the case of the first ASCII letter of s.
func toggleCase(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
			return s[:i] + string(c-32) + s[i+1:]
		case c >= 'A' && c <= 'Z':
			return s[:i] + string(c+32) + s[i+1:]
		}
	}
	panic("tokencases: no letter to toggle")
}

// malleateBy returns R || (S + k·L).
func malleateBy(sig []byte, k int64) []byte {
	s := make([]byte, 32)
	for i := range s {
		s[i] = sig[63-i]
	}
	n := new(big.Int).Add(new(big.Int).SetBytes(s), new(big.Int).Mul(big.NewInt(k), groupOrder))
	be := n.FillBytes(make([]byte, 32))
	out := append([]byte(nil), sig[:32]...)
	for i := 31; i >= 0; i-- {
		out = append(out, be[i])
	}
	return out
}

// sEqualsL returns R || L.
func sEqualsL(sig []byte) []byte {
	be := groupOrder.FillBytes(make([]byte, 32))
	out := append([]byte(nil), sig[:32]...)
	for i := 31; i >= 0; i-- {
		out = append(out, be[i])
	}
	return out
}

// paddedPayload encodes the payload with '=' padding (needs len%3 != 0).
func paddedPayload(key ed25519.PrivateKey, h string) string {
	for pad := 0; ; pad++ {
		c := claims().with("p", q(strings.Repeat("x", pad))).String()
		if len(c)%3 != 0 {
			return SignSegments(key, b64.EncodeToString([]byte(h)), base64.URLEncoding.EncodeToString([]byte(c)))
		}
	}
}
