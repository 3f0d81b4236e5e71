package verifier_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/flashgate/flashgate/verifier"
)

func ExampleVerifier_Verify() {
	// The issuer's key (deterministic here; keys/ generates real ones).
	seed := sha256.Sum256([]byte("example"))
	priv := ed25519.NewKeyFromSeed(seed[:])
	keys := verifier.NewStaticKeys(map[string]ed25519.PublicKey{"k1": priv.Public().(ed25519.PublicKey)})

	// A token as the issuer mints it.
	enc := base64.RawURLEncoding
	header := `{"alg":"EdDSA","kid":"k1","typ":"flashgate-admission+jwt"}`
	claims := `{"iss":"https://issuer.example","aud":"orders","sub":"user-12345",` +
		`"product":"sku-1","jti":"1234.56.1763680000000","iat":1763680000,"exp":1763680300}`
	input := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(claims))
	token := input + "." + enc.EncodeToString(ed25519.Sign(priv, []byte(input)))

	v, err := verifier.New(keys, verifier.Config{
		Issuer:   "https://issuer.example",
		Audience: "orders",
		Now:      func() time.Time { return time.Unix(1763680060, 0) }, // injected clock
	})
	if err != nil {
		panic(err)
	}
	tok, err := v.Verify(context.Background(), token, verifier.Expect{Product: "sku-1"})
	if err != nil {
		fmt.Println("refused:", verifier.CodeOf(err))
		return
	}
	fmt.Println(tok.User, tok.Product, tok.ID, tok.ExpiresAt.Format(time.RFC3339))

	// Five minutes later the same token is expired.
	late, _ := verifier.New(keys, verifier.Config{
		Issuer: "https://issuer.example", Audience: "orders",
		Now: func() time.Time { return time.Unix(1763680300, 0) },
	})
	_, err = late.Verify(context.Background(), token, verifier.Expect{Product: "sku-1"})
	fmt.Println("later:", verifier.CodeOf(err))
	// Output:
	// user-12345 sku-1 1234.56.1763680000000 2025-11-20T23:11:40Z
	// later: expired
}
