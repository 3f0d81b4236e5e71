package remote_test

import (
	"context"
	"log"

	"github.com/flashgate/flashgate/verifier"
	"github.com/flashgate/flashgate/verifier/remote"
)

// An order service verifies admission tokens with the issuer's published
// keys. The key set lives as long as ctx.
func ExampleNew() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ks, err := remote.New(ctx, "https://queue.example.com/.well-known/jwks.json", nil)
	if err != nil {
		log.Fatal(err) // only an invalid URL fails
	}
	v, err := verifier.New(ks, verifier.Config{Issuer: "flashgate", Audience: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	_ = v // v.Verify(ctx, raw, verifier.Expect{Product: "sneaker-drop"})
}
