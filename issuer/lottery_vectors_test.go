package issuer_test

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/issuer"
)

// lotteryVectors is testdata/lottery-vectors.json.
type lotteryVectors struct {
	Room, Epoch   string
	KeyUTF8       string `json:"key_utf8"`
	Secret        string
	Commitment    string
	Cutoff        int64
	EntrantDigest string `json:"entrant_digest"`
	Entrants      []struct {
		Arrival int64
		User    string
		Leaf    string
	}
	Draws map[string]struct {
		BeaconRound     uint64 `json:"beacon_round"`
		BeaconSignature string `json:"beacon_signature"`
		Randomness      string
		Seed            string
		Places          map[string]int64
	}
}

func loadLotteryVectors(t *testing.T) lotteryVectors {
	t.Helper()
	b, err := os.ReadFile("../testdata/lottery-vectors.json")
	require.NoError(t, err)
	var v lotteryVectors
	require.NoError(t, json.Unmarshal(b, &v))
	require.NotEmpty(t, v.Draws)
	return v
}

// TestLotteryVectors: the Go checker computes every value of the test
// vectors from the key, room, epoch, entrants and beacon round alone.
func TestLotteryVectors(t *testing.T) {
	v := loadLotteryVectors(t)
	assert.Equal(t, v.Secret, issuer.LotterySecret([]byte(v.KeyUTF8), v.Room, v.Epoch))
	assert.Equal(t, v.Commitment, issuer.LotteryCommitment(v.Room, v.Epoch, v.Secret))
	var es []issuer.Entrant
	for _, e := range v.Entrants {
		es = append(es, issuer.Entrant{Seq: e.Arrival, User: e.User})
		assert.Equal(t, e.Leaf, issuer.EntrantLeaf(v.Room, v.Epoch, issuer.Entrant{Seq: e.Arrival, User: e.User}))
	}
	assert.Equal(t, v.EntrantDigest, issuer.EntrantDigest(v.Room, v.Epoch, es))
	for name, d := range v.Draws {
		if d.BeaconRound > 0 {
			rnd, err := issuer.VerifyBeacon(issuer.Quicknet, issuer.BeaconRound{Round: d.BeaconRound, Signature: d.BeaconSignature})
			require.NoError(t, err, name)
			assert.Equal(t, d.Randomness, rnd, name)
		}
		assert.Equal(t, d.Seed, issuer.LotterySeed(v.Room, v.Epoch, v.Secret, d.Randomness, v.EntrantDigest), name)
		require.Len(t, d.Places, int(v.Cutoff))
		seen := map[int64]bool{}
		for s := int64(1); s <= v.Cutoff; s++ {
			p := issuer.LotteryPlace(d.Seed, v.Epoch, v.Cutoff, s)
			assert.Equal(t, d.Places[strconv.FormatInt(s, 10)], p, "%s: arrival %d", name, s)
			seen[p] = true
		}
		assert.Len(t, seen, int(v.Cutoff), name+": a permutation")
	}
}
