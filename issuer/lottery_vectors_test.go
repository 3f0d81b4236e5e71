package issuer_test

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
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

// TestLotteryDocsWorkedExample: the worked example of docs/rooms.md "The
// draw, bit for bit" is the test vectors' beacon draw, and the Go checker
// recomputes every line of it from the lines above.
func TestLotteryDocsWorkedExample(t *testing.T) {
	v := loadLotteryVectors(t)
	doc, err := os.ReadFile("../docs/rooms.md")
	require.NoError(t, err)
	s := string(doc)
	i := strings.Index(s, "### The draw, bit for bit")
	require.GreaterOrEqual(t, i, 0, "docs/rooms.md has no \"The draw, bit for bit\"")
	j := strings.Index(s[i:], "```text\n")
	require.GreaterOrEqual(t, j, 0, "no worked example block")
	block := s[i+j+len("```text\n"):]
	block = block[:strings.Index(block, "```")]
	ex := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		k, val, ok := strings.Cut(line, "  ")
		require.True(t, ok, line)
		ex[strings.TrimSpace(k)] = strings.TrimSpace(val)
	}
	d := v.Draws["beacon"]
	cutoff, err := strconv.ParseInt(ex["cutoff"], 10, 64)
	require.NoError(t, err)
	round, err := strconv.ParseUint(ex["beacon round"], 10, 64)
	require.NoError(t, err)
	var es []issuer.Entrant
	for _, e := range strings.Split(ex["entrants"], ", ") {
		n, u, _ := strings.Cut(e, " ")
		s, err := strconv.ParseInt(n, 10, 64)
		require.NoError(t, err)
		es = append(es, issuer.Entrant{Seq: s, User: u})
	}
	room, epoch := ex["room"], ex["epoch"]
	secret := issuer.LotterySecret([]byte(ex["key"]), room, epoch)
	rnd, err := issuer.VerifyBeacon(issuer.Quicknet, issuer.BeaconRound{Round: round, Signature: ex["signature"]})
	require.NoError(t, err)
	digest := issuer.EntrantDigest(room, epoch, es)
	seed := issuer.LotterySeed(room, epoch, secret, rnd, digest)
	for k, want := range map[string]string{
		"room": v.Room, "epoch": v.Epoch, "key": v.KeyUTF8, "secret": secret, "commitment": issuer.LotteryCommitment(room, epoch, secret),
		"leaf of 1 ana": issuer.EntrantLeaf(room, epoch, es[0]), "entrant digest": digest, "randomness": rnd, "seed": seed,
		"signature": d.BeaconSignature,
	} {
		assert.Equal(t, want, ex[k], "docs line %q", k)
	}
	assert.Equal(t, v.Secret, secret)
	assert.Equal(t, v.EntrantDigest, digest)
	assert.Equal(t, d.Seed, seed)
	assert.Equal(t, d.BeaconRound, round)
	assert.EqualValues(t, v.Cutoff, cutoff)
	places := strings.Fields(ex["places"])
	require.Len(t, places, int(cutoff))
	for _, p := range places {
		a, pl, _ := strings.Cut(p, ":")
		s, _ := strconv.ParseInt(a, 10, 64)
		want, _ := strconv.ParseInt(pl, 10, 64)
		assert.Equal(t, want, issuer.LotteryPlace(seed, epoch, cutoff, s), "docs: place of arrival %d", s)
		assert.Equal(t, d.Places[a], want)
	}
}
