package verifier

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"
)

// Verifier checks admission tokens offline against a KeySet. It is
// immutable after New and safe for concurrent use.
type Verifier struct {
	keys        KeySet
	prepared    PreparedKeySet // keys, when it also implements PreparedKeySet
	issuer      string
	audience    string
	product     string
	leeway      int64 // seconds
	maxLifetime int64 // seconds
	now         func() time.Time
	directives  Directives
}

// New returns a Verifier for keys and cfg.
//
// It fails when keys is nil, Issuer or Audience is empty, Leeway is negative
// or larger than MaxLeeway, or MaxLifetime is negative. Leeway and
// MaxLifetime are used in whole seconds (rounded down), the unit of the
// time claims. A nil Now means time.Now; a zero MaxLifetime means
// DefaultMaxLifetime.
func New(keys KeySet, cfg Config) (*Verifier, error) {
	switch {
	case keys == nil:
		return nil, errors.New("verifier: nil KeySet")
	case cfg.Issuer == "":
		return nil, errors.New("verifier: Config.Issuer is required")
	case cfg.Audience == "":
		return nil, errors.New("verifier: Config.Audience is required")
	case cfg.Leeway < 0 || cfg.Leeway > MaxLeeway:
		return nil, fmt.Errorf("verifier: Config.Leeway %v outside [0, %v]", cfg.Leeway, MaxLeeway)
	case cfg.MaxLifetime < 0:
		return nil, fmt.Errorf("verifier: Config.MaxLifetime %v is negative", cfg.MaxLifetime)
	}
	v := &Verifier{
		keys:        keys,
		issuer:      cfg.Issuer,
		audience:    cfg.Audience,
		product:     cfg.Product,
		leeway:      int64(cfg.Leeway / time.Second),
		maxLifetime: int64(cfg.MaxLifetime / time.Second),
		now:         cfg.Now,
		directives:  cfg.Directives,
	}
	v.prepared, _ = keys.(PreparedKeySet)
	if cfg.MaxLifetime == 0 {
		v.maxLifetime = int64(DefaultMaxLifetime / time.Second)
	}
	if v.now == nil {
		v.now = time.Now
	}
	return v, nil
}

const (
	// maxKIDLen bounds the kid before it reaches the KeySet.
	maxKIDLen = 128
	// sigSegmentLen is the length of an Ed25519 signature (64 bytes) in
	// unpadded base64url.
	sigSegmentLen = 86
	// maxDecoded is the largest decoded header or payload of a token that
	// passed the MaxTokenSize check.
	maxDecoded = MaxTokenSize / 4 * 3
)

// Verify checks raw, a compact-serialized admission token, and returns its
// claims. The checks run in a fixed order, cheapest first, and the first
// failure is returned, wrapping one of the sentinel errors (use errors.Is
// or CodeOf):
//
//  1. size: len(raw) > MaxTokenSize → ErrTooLarge (before any decoding);
//  2. shape: exactly three non-empty segments of base64url characters → ErrMalformed;
//  3. header: strict base64url, one JSON object → ErrMalformed; repeated member → ErrDuplicateKey;
//  4. alg == "EdDSA" exactly → ErrUnsupportedAlg;
//  5. no jwk, jku, x5u, x5c, x5t, x5t#S256, crit, b64 member → ErrForbiddenHeader;
//  6. typ == TokenType exactly → ErrBadType;
//  7. kid a non-empty string of ≤ 128 bytes → ErrUnknownKey, then the KeySet's error;
//  8. signature: 64 bytes, strict base64url, ed25519.Verify over the raw
//     "header.payload" bytes (or the PreparedKey's Verify, which answers
//     the same, when the KeySet is a PreparedKeySet) → ErrBadSignature;
//  9. payload: strict base64url, one JSON object → ErrMalformed; repeated member → ErrDuplicateKey;
//  10. claim types: jti a non-empty string, exp and iat integers, nbf an
//     integer if present, exp > iat → ErrInvalidClaims;
//  11. iss → ErrBadIssuer; aud (one string) → ErrBadAudience;
//     product → ErrBadProduct; sub (and want.User) → ErrBadUser;
//  12. exp − iat ≤ MaxLifetime → ErrLifetimeTooLong;
//  13. time, with now = Config.Now() in Unix seconds: now ≥ exp + leeway →
//     ErrExpired; iat > now + leeway or nbf > now + leeway → ErrNotYetValid;
//  14. with Config.Directives: iat < the room's not_before → ErrRoomStopped;
//     no directive document to answer from → ErrDirectivesUnavailable.
//
// Because the signature is checked before any claim, a forged token always
// reports ErrBadSignature, whatever its claims. (The Ed25519 arithmetic of
// step 8 actually runs last, after steps 9–14 are decided, but its failure
// takes precedence over theirs.)
//
// Verify is Prepare followed by Pending.Finish with the result of
// crypto/ed25519's Verify — or, for a PreparedKeySet, of the prepared key's
// Verify, which must give the same answer: the one path every host shares.
func (v *Verifier) Verify(ctx context.Context, raw string, want Expect) (*Token, error) {
	p, err := v.Prepare(ctx, raw, want)
	if err != nil {
		return nil, err
	}
	return p.Verify()
}

// Verify finishes p with the signature check Verifier.Verify makes (the
// PreparedKey's Verify for a PreparedKeySet, else crypto/ed25519's): Verify's
// answer for the token Prepare was given.
func (p *Pending) Verify() (*Token, error) {
	if p.prep != nil {
		return p.Finish(p.prep.Verify(bytesOf(p.input), p.sig))
	}
	return p.Finish(ed25519.Verify(p.key, bytesOf(p.input), p.sig[:]))
}

// Pending is a token that passed every check of Verify that precedes the
// Ed25519 arithmetic (steps 1–7 and the signature's shape in step 8), with
// the outcome of steps 9–14 already decided but withheld until Finish is
// told whether the signature verifies. It lets a host that has Ed25519 of
// its own (WebCrypto at the edge: wasm/README.md, ABI v2) do exactly one
// signature check while every rule stays here.
//
// A Pending is a value; it holds no reference to the Verifier.
type Pending struct {
	key   ed25519.PublicKey
	prep  PreparedKey // non-nil when the KeySet is a PreparedKeySet
	input string      // the raw "header.payload" bytes
	sig   [ed25519.SignatureSize]byte
	tok   *Token
	err   error
}

// PublicKey returns the 32-byte Ed25519 public key the token's kid names.
// The caller must not modify it.
func (p *Pending) PublicKey() ed25519.PublicKey { return p.key }

// SigningInput returns the JWS signing input (RFC 7515 §5.2): the token's
// raw "header.payload" bytes, exactly as received.
func (p *Pending) SigningInput() string { return p.input }

// Signature returns the decoded 64-byte Ed25519 signature (R ‖ S, RFC 8032 §5.1.6).
func (p *Pending) Signature() [ed25519.SignatureSize]byte { return p.sig }

// Finish returns Verify's answer given whether Signature is a valid Ed25519
// signature (RFC 8032 §5.1.7, S < L enforced) of SigningInput under
// PublicKey: ErrBadSignature when signatureValid is false, whatever the
// claims; otherwise the outcome of steps 9–14 (the Token, or the first
// claim error). signatureValid must come from an actual Ed25519
// verification: passing true without one accepts a forged token.
func (p *Pending) Finish(signatureValid bool) (*Token, error) {
	if !signatureValid {
		return nil, ErrBadSignature
	}
	return p.tok, p.err
}

// InsecureClaims returns the outcome of steps 9–14 — the token's claims, or
// the first claim error — WITHOUT the signature's verdict: the claims are
// not authenticated, and anyone can write a token that has them. Use them
// only to look up a record that authenticates the token by other means,
// such as the issuer's note of the exact token it minted
// (issuer.CompleteMinted); otherwise call Finish with an actual Ed25519
// verification. A claim error here may still be Verify's ErrBadSignature
// (the signature takes precedence): only Finish gives Verify's answer.
func (p *Pending) InsecureClaims() (*Token, error) { return p.tok, p.err }

// Prepare runs Verify's steps 1–7 and the shape checks of step 8 and
// returns their first failure, exactly as Verify would. Otherwise it
// decides steps 9–14 and returns a Pending whose Finish gives Verify's
// answer once the signature has been checked. Verify(ctx, raw, want) ≡
// Prepare then Finish(ed25519.Verify(PublicKey, SigningInput, Signature)).
func (v *Verifier) Prepare(ctx context.Context, raw string, want Expect) (Pending, error) {
	var p Pending
	// 1. Size, before anything proportional to it.
	if len(raw) > MaxTokenSize {
		return p, fmt.Errorf("%w: %d bytes", ErrTooLarge, len(raw))
	}

	// 2. Shape: three non-empty base64url segments.
	dot1, dot2 := -1, -1
	for i := 0; i < len(raw); i++ {
		switch b64Table[raw[i]] {
		case b64Invalid:
			return p, fmt.Errorf("%w: byte %#02x at offset %d is not base64url", ErrMalformed, raw[i], i)
		case b64Dot:
			switch {
			case dot1 < 0:
				dot1 = i
			case dot2 < 0:
				dot2 = i
			default:
				return p, fmt.Errorf("%w: more than three segments", ErrMalformed)
			}
		}
	}
	if dot2 < 0 {
		return p, fmt.Errorf("%w: fewer than three segments", ErrMalformed)
	}
	if dot1 == 0 || dot2 == dot1+1 || dot2 == len(raw)-1 {
		return p, fmt.Errorf("%w: empty segment", ErrMalformed)
	}
	hdrSeg, paySeg, sigSeg := raw[:dot1], raw[dot1+1:dot2], raw[dot2+1:]

	// 3. Header JSON. buf holds the header, later the payload.
	var buf [maxDecoded]byte
	n, ok := decodeSegment(buf[:], hdrSeg)
	if !ok {
		return p, fmt.Errorf("%w: header is not strict base64url", ErrMalformed)
	}
	hdr := buf[:n]
	var hmem [maxMembers]member
	members, err := parseTopObject(hdr, hmem[:0])
	if err != nil {
		return p, jsonError("header", err)
	}
	var alg, typ, kid *member
	forbidden := ""
	var scratch [32]byte
	for k := range members {
		m := &members[k]
		switch name := nameOf(hdr, m, &scratch); string(name) {
		case "alg":
			alg = m
		case "typ":
			typ = m
		case "kid":
			kid = m
		case "jwk", "jku", "x5u", "x5c", "x5t", "x5t#S256", "crit", "b64":
			if forbidden == "" {
				forbidden = string(name)
			}
		}
	}

	// 4. alg is fixed by the key type, never chosen by the token.
	if !stringIs(hdr, alg, Alg) {
		return p, fmt.Errorf("%w: alg %s", ErrUnsupportedAlg, describe(hdr, alg))
	}
	// 5. Header parameters that would let the token pick its own key or
	// change how it is processed.
	if forbidden != "" {
		return p, fmt.Errorf("%w: %q", ErrForbiddenHeader, forbidden)
	}
	// 6. Explicit typing (RFC 8725 §3.11).
	if !stringIs(hdr, typ, TokenType) {
		return p, fmt.Errorf("%w: typ %s", ErrBadType, describe(hdr, typ))
	}
	// 7. Key lookup.
	if kid == nil || kid.kind != kindString {
		return p, fmt.Errorf("%w: kid %s", ErrUnknownKey, describe(hdr, kid))
	}
	if l := stringLen(hdr, kid); l == 0 || l > maxKIDLen {
		return p, fmt.Errorf("%w: kid length %d outside [1, %d]", ErrUnknownKey, l, maxKIDLen)
	}
	keyID := stringValue(hdr, kid)
	var pub ed25519.PublicKey
	var prep PreparedKey
	if v.prepared != nil {
		if prep, err = v.prepared.PreparedKey(ctx, keyID); err == nil && prep != nil {
			pub = prep.PublicKey()
		}
	} else {
		pub, err = v.keys.PublicKey(ctx, keyID)
	}
	if err != nil {
		if !isVerifierError(err) {
			// A KeySet that does not use our sentinels: it could not answer.
			return p, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		return p, err
	}

	// 8. The signature's shape; its arithmetic is Finish's argument.
	if p.sig, err = decodeSignature(pub, sigSeg); err != nil {
		return p, err
	}
	p.key, p.prep, p.input = pub, prep, raw[:dot2]

	// 9. Payload JSON.
	n, ok = decodeSegment(buf[:], paySeg)
	if !ok {
		p.err = fmt.Errorf("%w: payload is not strict base64url", ErrMalformed)
		return p, nil
	}
	pl := buf[:n]
	var pmem [maxMembers]member
	members, err = parseTopObject(pl, pmem[:0])
	if err != nil {
		p.err = jsonError("payload", err)
		return p, nil
	}
	p.tok, p.err = v.claimsFrom(pl, members, keyID, want, &scratch)
	if p.tok != nil {
		p.tok.Raw = raw
		// 14. The room's edge directive (an operator's stop).
		if v.directives != nil {
			if p.err = v.checkDirective(ctx, p.tok); p.err != nil {
				p.tok = nil
			}
		}
	}
	return p, nil
}

// claimsFrom picks the claims Verify checks out of the payload's members and
// checks them (steps 10 on).
func (v *Verifier) claimsFrom(pl []byte, members []member, keyID string, want Expect, scratch *[32]byte) (*Token, error) {
	var iss, aud, sub, product, jti, exp, iat, nbf *member
	for k := range members {
		m := &members[k]
		switch string(nameOf(pl, m, scratch)) {
		case "iss":
			iss = m
		case "aud":
			aud = m
		case "sub":
			sub = m
		case ProductClaim:
			product = m
		case "jti":
			jti = m
		case "exp":
			exp = m
		case "iat":
			iat = m
		case "nbf":
			nbf = m
		}
	}
	return v.checkClaims(pl, keyID, want, iss, aud, sub, product, jti, exp, iat, nbf)
}

func (v *Verifier) checkClaims(pl []byte, keyID string, want Expect, iss, aud, sub, product, jti, exp, iat, nbf *member) (*Token, error) {
	// 10. Claim types (RFC 7519 §4.1; integers per RFC 7493 §2.2).
	if jti == nil || jti.kind != kindString || jti.val.start == jti.val.end {
		return nil, fmt.Errorf("%w: jti %s, want a non-empty string", ErrInvalidClaims, describe(pl, jti))
	}
	expV, ok := intValue(pl, exp)
	if !ok {
		return nil, fmt.Errorf("%w: exp %s, want an integer in (0, 2^53)", ErrInvalidClaims, describe(pl, exp))
	}
	iatV, ok := intValue(pl, iat)
	if !ok {
		return nil, fmt.Errorf("%w: iat %s, want an integer in (0, 2^53)", ErrInvalidClaims, describe(pl, iat))
	}
	var nbfV int64
	if nbf != nil {
		if nbfV, ok = intValue(pl, nbf); !ok {
			return nil, fmt.Errorf("%w: nbf %s, want an integer in (0, 2^53)", ErrInvalidClaims, describe(pl, nbf))
		}
	}
	if expV <= iatV {
		return nil, fmt.Errorf("%w: exp %d not after iat %d", ErrInvalidClaims, expV, iatV)
	}

	// 11. Who the token is for.
	if !stringIs(pl, iss, v.issuer) {
		return nil, fmt.Errorf("%w: iss %s", ErrBadIssuer, describe(pl, iss))
	}
	if !stringIs(pl, aud, v.audience) {
		return nil, fmt.Errorf("%w: aud %s", ErrBadAudience, describe(pl, aud))
	}
	wantProduct := want.Product
	if wantProduct == "" {
		wantProduct = v.product
	}
	if wantProduct == "" {
		return nil, fmt.Errorf("%w: no expected product configured", ErrBadProduct)
	}
	if !stringIs(pl, product, wantProduct) {
		return nil, fmt.Errorf("%w: %s %s", ErrBadProduct, ProductClaim, describe(pl, product))
	}
	if sub == nil || sub.kind != kindString || sub.val.start == sub.val.end {
		return nil, fmt.Errorf("%w: sub %s, want a non-empty string", ErrBadUser, describe(pl, sub))
	}
	if want.User != "" && !stringIs(pl, sub, want.User) {
		return nil, fmt.Errorf("%w: sub %s", ErrBadUser, describe(pl, sub))
	}

	// 12. Lifetime.
	if expV-iatV > v.maxLifetime {
		return nil, fmt.Errorf("%w: exp − iat = %ds > %ds", ErrLifetimeTooLong, expV-iatV, v.maxLifetime)
	}

	// 13. Time.
	now := v.now().Unix()
	if now >= expV+v.leeway {
		return nil, fmt.Errorf("%w: exp %d, now %d, leeway %ds", ErrExpired, expV, now, v.leeway)
	}
	if iatV > now+v.leeway {
		return nil, fmt.Errorf("%w: iat %d, now %d, leeway %ds", ErrNotYetValid, iatV, now, v.leeway)
	}
	if nbf != nil && nbfV > now+v.leeway {
		return nil, fmt.Errorf("%w: nbf %d, now %d, leeway %ds", ErrNotYetValid, nbfV, now, v.leeway)
	}

	t := &Token{
		KeyID:     keyID,
		Issuer:    v.issuer,
		Audience:  v.audience,
		Product:   wantProduct,
		User:      want.User,
		IssuedAt:  time.Unix(iatV, 0).UTC(),
		ExpiresAt: time.Unix(expV, 0).UTC(),
	}
	if t.User == "" {
		t.User = stringValue(pl, sub)
	}
	t.ID = stringValue(pl, jti)
	return t, nil
}

// verifySignature is the signature layer: decodeSignature, then
// crypto/ed25519's Verify (RFC 8032 §5.1.7, which rejects S ≥ L and
// non-canonical R) of signingInput under pub.
func verifySignature(pub ed25519.PublicKey, signingInput []byte, sigSeg string) error {
	sig, err := decodeSignature(pub, sigSeg)
	if err != nil {
		return err
	}
	if !ed25519.Verify(pub, signingInput, sig[:]) {
		return ErrBadSignature
	}
	return nil
}

// decodeSignature checks the shape of step 8: pub must be 32 bytes and
// sigSeg the unpadded, strict base64url encoding of exactly 64 bytes,
// else ErrBadSignature.
func decodeSignature(pub ed25519.PublicKey, sigSeg string) (sig [ed25519.SignatureSize]byte, err error) {
	if len(pub) != ed25519.PublicKeySize {
		return sig, fmt.Errorf("%w: key set returned a %d-byte key", ErrBadSignature, len(pub))
	}
	if len(sigSeg) != sigSegmentLen {
		return sig, fmt.Errorf("%w: signature segment has %d characters, want %d", ErrBadSignature, len(sigSeg), sigSegmentLen)
	}
	if n, ok := decodeSegment(sig[:], sigSeg); !ok || n != len(sig) {
		return sig, fmt.Errorf("%w: signature is not strict base64url", ErrBadSignature)
	}
	return sig, nil
}

// isVerifierError reports whether err wraps one of this package's *Error
// values (a plain type-assertion walk: no reflection, TinyGo-friendly).
func isVerifierError(err error) bool {
	for err != nil {
		if _, ok := err.(*Error); ok {
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

func jsonError(where string, err error) error {
	if err == errJSONDuplicate {
		return fmt.Errorf("%w in %s", ErrDuplicateKey, where)
	}
	return fmt.Errorf("%w: %s: %v", ErrMalformed, where, err)
}

// describe renders a member's value for an error message: missing, its
// kind, or a quoted and truncated string.
func describe(b []byte, m *member) string {
	if m == nil {
		return "missing"
	}
	switch m.kind {
	case kindString:
		s := stringValue(b, m)
		if len(s) > 64 {
			s = s[:64] + "…"
		}
		return fmt.Sprintf("%q", s)
	case kindNumber:
		s := string(m.val.of(b))
		if len(s) > 32 {
			s = s[:32] + "…"
		}
		return s
	case kindObject:
		return "(object)"
	case kindArray:
		return "(array)"
	case kindTrue, kindFalse:
		return "(boolean)"
	case kindNull:
		return "null"
	}
	return "(invalid)"
}
