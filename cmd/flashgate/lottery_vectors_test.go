package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
)

// TestLotteryVerifyVectors: `flashgate lottery verify` passes the test
// vectors (testdata/lottery-vectors.json): for each draw, a room view built
// from the vectors' public values alone (secret, entrant digest, beacon round
// and signature, seed, cutoff) and a receipt per entrant under the vectors'
// commitment; the CLI checks the commitment, the quicknet round's BLS
// signature and the seed, and prints each entrant's expected place — and
// "none" as the influence only for the beacon draw.
func TestLotteryVerifyVectors(t *testing.T) {
	b, err := os.ReadFile("../../testdata/lottery-vectors.json")
	require.NoError(t, err)
	var v struct {
		Room, Epoch, Secret, Commitment string
		Cutoff                          int64
		EntrantDigest                   string `json:"entrant_digest"`
		Entrants                        []struct {
			Arrival int64
			User    string
		}
		Draws map[string]struct {
			BeaconRound     uint64 `json:"beacon_round"`
			BeaconSignature string `json:"beacon_signature"`
			Seed            string
			Places          map[string]int64
		}
	}
	require.NoError(t, json.Unmarshal(b, &v))
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	jwks, err := ring.PublicJWKS()
	require.NoError(t, err)
	dir := t.TempDir()
	jwksFile := filepath.Join(dir, "jwks.json")
	require.NoError(t, os.WriteFile(jwksFile, jwks, 0o600))
	for name, d := range v.Draws {
		randomness := issuer.OperatorChosen
		l := map[string]any{"commitment": v.Commitment, "commitment_sha1": "", "drawn": true, "seed": d.Seed,
			"cutoff": v.Cutoff, "bits": issuer.LotteryBits(v.Cutoff), "secret": v.Secret, "entrants": v.EntrantDigest}
		if d.BeaconRound > 0 {
			randomness = "drand:" + issuer.Quicknet.Hash
			l["beacon"], l["beacon_round"], l["beacon_signature"] = issuer.Quicknet, d.BeaconRound, d.BeaconSignature
		}
		l["randomness"] = randomness
		view, err := json.Marshal(map[string]any{"room": v.Room, "epoch": v.Epoch, "pre_queue": "shuffle", "lottery": l})
		require.NoError(t, err)
		viewFile := filepath.Join(dir, name+"-view.json")
		require.NoError(t, os.WriteFile(viewFile, view, 0o600))
		for _, e := range v.Entrants {
			c := flashgate.ReceiptClaims{Iss: "https://issuer.test", Room: v.Room, Epoch: v.Epoch, Sub: e.User, Arrival: e.Arrival,
				Iat: time.Now().Unix(), Commitment: v.Commitment, Randomness: randomness}
			rc, err := ring.SignReceipt(c.JSON())
			require.NoError(t, err)
			r := runCLI(t, "", "lottery", "verify", "--receipt", rc, "--jwks", jwksFile, "--room-view", viewFile)
			var out map[string]any
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), "stdout %q stderr %q", r.stdout, r.stderr)
			require.Equal(t, exitOK, r.code, "%s %s: %v", name, e.User, out)
			assert.EqualValues(t, d.Places[strconv.FormatInt(e.Arrival, 10)], out["place"], "%s: %s", name, e.User)
			if d.BeaconRound > 0 {
				assert.Equal(t, "none", out["influence"], name)
			} else {
				assert.Contains(t, out["influence"], "operator-chosen", name)
			}
		}
		// The beacon draw with another round's signature is refused.
		if d.BeaconRound > 0 {
			l["beacon_signature"] = "b713718a38ae728dfd477991af2822e08d2f305e47718cef9f7848ce4050e7be41076862b98fad56e91a6b85b89cd97b"
			view, _ := json.Marshal(map[string]any{"room": v.Room, "epoch": v.Epoch, "pre_queue": "shuffle", "lottery": l})
			require.NoError(t, os.WriteFile(viewFile, view, 0o600))
			c := flashgate.ReceiptClaims{Room: v.Room, Epoch: v.Epoch, Sub: "x", Arrival: 1, Commitment: v.Commitment, Randomness: randomness}
			rc, err := ring.SignReceipt(c.JSON())
			require.NoError(t, err)
			r := runCLI(t, "", "lottery", "verify", "--receipt", rc, "--jwks", jwksFile, "--room-view", viewFile)
			assert.Equal(t, exitSeedMismatch, r.code, r.stdout)
			assert.Contains(t, r.stdout, "beacon_invalid")
		}
	}
}
