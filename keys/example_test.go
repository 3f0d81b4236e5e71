package keys_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/flashgate/flashgate/keys"
)

func ExampleGenerate() {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ring, err := keys.Generate(t0)
	if err != nil {
		panic(err)
	}
	show := func() {
		b, _ := ring.PublicJWKS()
		var set struct{ Keys []json.RawMessage }
		_ = json.Unmarshal(b, &set)
		fmt.Println("public keys:", len(set.Keys))
		for _, k := range ring.Keys() {
			fmt.Println(" ", k.Status, k.Created.UTC().Format(time.RFC3339), k.RetireUntil.UTC().Format(time.TimeOnly))
		}
	}
	show()

	// A rotation 30 days later: the next key signs, the old one is kept
	// for the longest token lifetime (15 min) plus RetireMargin (2 min).
	if err := ring.Rotate(t0.AddDate(0, 0, 30), 15*time.Minute); err != nil {
		panic(err)
	}
	show()
	// Output:
	// public keys: 2
	//   active 2026-01-01T00:00:00Z 00:00:00
	//   next 2026-01-01T00:00:00Z 00:00:00
	// public keys: 2
	//   active 2026-01-01T00:00:00Z 00:00:00
	//   next 2026-01-31T00:00:00Z 00:00:00
	//   retired 2026-01-01T00:00:00Z 00:17:00
}
