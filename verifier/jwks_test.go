package verifier_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/verifier"
)

const (
	rfc8037X   = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" // RFC 8037 A.2
	rfc8037Key = `{"kty":"OKP","crv":"Ed25519","x":"` + rfc8037X + `","kid":"a"}`
)

func TestParseJWKS(t *testing.T) {
	ok := []struct {
		name string
		doc  string
		ids  []string
	}{
		{"one key", `{"keys":[` + rfc8037Key + `]}`, []string{"a"}},
		{"use sig alg EdDSA", `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"` + rfc8037X + `","kid":"a","use":"sig","alg":"EdDSA","key_ops":["verify"]}]}`, []string{"a"}},
		{"others skipped", `{"keys":[
			{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0","kid":"ec"},
			{"kty":"OKP","crv":"X25519","x":"` + rfc8037X + `","kid":"x"},
			{"kty":"OKP","crv":"Ed25519","x":"` + rfc8037X + `","kid":"enc","use":"enc"},
			{"kty":"OKP","crv":"Ed25519","x":"` + rfc8037X + `","kid":"rs","alg":"RS256"},
			{"kty":"OKP","crv":"Ed25519","x":"` + rfc8037X + `","kid":"sign-only","key_ops":["sign"]},
			{"kty":"RSA","n":"AQAB","e":"AQAB","kid":"rsa"},
			{"kty":"OKP","crv":"Ed25519","x":"` + rfc8037X + `","kid":"b"},
			` + rfc8037Key + `], "extra": {"ignored": true}}`, []string{"a", "b"}},
	}
	for _, tc := range ok {
		ks, err := verifier.ParseJWKS([]byte(tc.doc))
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.ids, ks.KeyIDs(), tc.name)
		pub, err := ks.PublicKey(context.Background(), tc.ids[0])
		require.NoError(t, err)
		require.Len(t, pub, 32)
	}
	bad := map[string]string{
		"not json":         `keys`,
		"empty":            ``,
		"no keys":          `{}`,
		"keys not array":   `{"keys":{}}`,
		"empty set":        `{"keys":[]}`,
		"only skipped":     `{"keys":[{"kty":"EC","crv":"P-256","x":"a","y":"b"}]}`,
		"private key":      `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"` + rfc8037X + `","kid":"a","d":"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"}]}`,
		"private rsa key":  `{"keys":[` + rfc8037Key + `,{"kty":"RSA","n":"AQAB","e":"AQAB","d":"AQAB"}]}`,
		"duplicate kid":    `{"keys":[` + rfc8037Key + `,` + rfc8037Key + `]}`,
		"duplicate member": `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"` + rfc8037X + `","kid":"a","kid":"b"}]}`,
		"duplicate keys":   `{"keys":[` + rfc8037Key + `],"keys":[]}`,
		"x short":          `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHUR","kid":"a"}]}`,
		"x padded":         `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"` + rfc8037X + `=","kid":"a"}]}`,
		"x std alphabet":   `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"a"}]}`,
		"no kid":           `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"` + rfc8037X + `"}]}`,
		"empty kid":        `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"` + rfc8037X + `","kid":""}]}`,
		"numeric kid":      `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"` + rfc8037X + `","kid":1}]}`,
		"no kty":           `{"keys":[{"crv":"Ed25519","x":"` + rfc8037X + `","kid":"a"}]}`,
		"key not object":   `{"keys":["` + rfc8037X + `"]}`,
		"trailing":         `{"keys":[` + rfc8037Key + `]} x`,
	}
	for name, doc := range bad {
		_, err := verifier.ParseJWKS([]byte(doc))
		require.Error(t, err, name)
	}
}
