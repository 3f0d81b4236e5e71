package issuer_test

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/internal/testing/testkit"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
)

// storeStrings returns every string the store holds: every key, and every
// value, field, member and score of every key (what an operator, a backup or
// a replica can read).
func storeStrings(t *testing.T, rdb *redis.Client) []string {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	var out []string
	for _, k := range keys {
		out = append(out, k)
		switch typ := rdb.Type(ctx, k).Val(); typ {
		case "string":
			out = append(out, rdb.Get(ctx, k).Val())
		case "hash":
			for f, v := range rdb.HGetAll(ctx, k).Val() {
				out = append(out, f, v)
			}
		case "zset":
			for _, z := range rdb.ZRangeWithScores(ctx, k, 0, -1).Val() {
				out = append(out, z.Member.(string), strconv.FormatFloat(z.Score, 'f', -1, 64))
			}
		case "set":
			out = append(out, rdb.SMembers(ctx, k).Val()...)
		case "stream":
			for _, m := range rdb.XRange(ctx, k, "-", "+").Val() {
				for f, v := range m.Values {
					out = append(out, f, v.(string))
				}
			}
		case "list":
			out = append(out, rdb.LRange(ctx, k, 0, -1).Val()...)
		default:
			t.Fatalf("key %s of type %s not read", k, typ)
		}
	}
	return out
}

// TestStoreReadingAttackFails is the audit of issue 36: whoever reads every
// key of a shuffle room before its draw — the whole store, at the last
// moment before the opening, with every entrant in — cannot predict the
// order. Each string in the store is tried as the seed, and as the secret
// the draw's seed derives from (LotterySeed with the entrant digest, which
// the reader can compute too); none predicts the first place more often
// than chance would (1 in k per guess) or the order. On 4dbe417 the stored
// lottery_seed predicts the whole order.
func TestStoreReadingAttackFails(t *testing.T) {
	ctx := context.Background()
	const k, rooms = 32, 8
	rdb := redistest.Start(t).Client(t)
	clk := newClock()
	is := newIssuer(t, rdb, clk)
	opens := clk.Now().Add(time.Minute)
	guesses, firstRight := 0, 0
	for r := range rooms {
		room := redistest.Room("attack" + strconv.Itoa(r))
		_, err := is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1000, RatePerMinute: 60000, Opens: opens, PreQueue: issuer.PreQueueShuffle})
		require.NoError(t, err)
		var es []issuer.Entrant
		for i := 1; i <= k; i++ {
			e, err := is.Enter(ctx, room, "u"+strconv.Itoa(i))
			require.NoError(t, err)
			es = append(es, issuer.Entrant{Seq: e.Arrival, User: "u" + strconv.Itoa(i)})
		}
		st, err := is.Stats(ctx, room)
		require.NoError(t, err)
		epoch := st.Epoch
		dump := storeStrings(t, rdb) // the attack: everything, before the draw
		seqs := make([]int64, k)
		for i := range seqs {
			seqs[i] = int64(i + 1)
		}
		bits := issuer.LotteryBits(k)
		digest := issuer.EntrantDigest(room, epoch, es)
		var predictions [][]int64
		seen := map[string]bool{}
		for _, s := range dump {
			if seen[s] {
				continue // one guess per distinct string: repeats would be the same guess
			}
			seen[s] = true
			for _, seed := range []string{s, issuer.LotterySeed(room, epoch, s, "", digest)} {
				predictions = append(predictions, issuer.LotteryOrder(issuer.Lottery{Seed: seed, Bits: bits}, epoch, seqs))
			}
		}
		require.NotEmpty(t, predictions)

		clk.Set(opens)
		_, err = is.Tick(ctx, room)
		require.NoError(t, err)
		got, _ := admittedOrder(t, rdb, room)
		require.Len(t, got, k, "everyone admitted at the opening, in the drawn order")
		for _, p := range predictions {
			require.NotEqual(t, got, p, "a string read from the store before the draw predicts the whole order")
			guesses++
			if p[0] == got[0] {
				firstRight++
			}
		}
		clk.Set(opens.Add(-time.Minute)) // the next room's pre-queue
	}
	// Chance: each guess names the first place with probability 1/k. Allow
	// 3 standard deviations over the mean (binomial).
	mean := float64(guesses) / k
	sd := mean * (1 - 1.0/k)
	bound := mean + 3*math.Sqrt(sd)
	assert.LessOrEqualf(t, float64(firstRight), bound, "%d of %d guesses named the first place (chance: %.1f)", firstRight, guesses, mean)
}

// TestBeaconLotteryWaitsForTheRound: with a beacon, the draw's seed exists
// only once the round after the opening is published: the line waits
// (nobody placed or admitted) until then, the room view names the chain and
// round from the configuration on, and afterwards every receipt verifies
// against the real quicknet round (served by a loopback stand-in relay),
// with no place an operator could have influenced.
func TestBeaconLotteryWaitsForTheRound(t *testing.T) {
	ctx := context.Background()
	v := loadQuicknet(t)
	relay := beaconRelay(t, v)
	const round = 657413
	opens := v.Chain.RoundTime(round).Add(-issuer.BeaconDelay)
	rdb := redistest.Start(t).Client(t)
	clk := testkit.NewClock(opens.Add(-time.Hour).Local())
	ring, err := keys.Generate(clk.Now())
	require.NoError(t, err)
	is := newIssuer(t, rdb, clk, func(c *issuer.Config) {
		c.Signer = ring
		c.LotteryKey = []byte("an issuer-held key, never in redis")
		c.Beacon = &issuer.Beacon{URL: relay.URL, Chain: v.Chain}
	})
	room := redistest.Room("beacon")
	_, err = is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1000, RatePerMinute: 60000, Opens: opens, PreQueue: issuer.PreQueueShuffle})
	require.NoError(t, err)
	before, err := is.RoomLottery(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, "drand", before.Source)
	assert.EqualValues(t, round, before.BeaconRound, "published with the commitment")
	const k = 20
	receipts := map[string]string{}
	for i := 1; i <= k; i++ {
		e, err := is.Enter(ctx, room, "b"+strconv.Itoa(i))
		require.NoError(t, err)
		require.NotEmpty(t, e.Receipt)
		assert.Equal(t, "drand:"+v.Chain.Hash, e.LotteryRandomness)
		receipts[e.User] = e.Receipt
	}
	clk.Set(opens)
	res, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Zero(t, res.Placed, "the round is not out: nobody placed")
	assert.Zero(t, res.Admitted, "nor admitted")
	mid, err := is.RoomLottery(ctx, room)
	require.NoError(t, err)
	require.True(t, mid.Drawn)
	assert.Empty(t, mid.Seed)
	assert.NotEmpty(t, mid.Entrants, "the entrant list is fixed before the round")
	assert.EqualValues(t, k, mid.EntrantCount)
	_, err = issuer.VerifyReceipt(ctx, receipts["b1"], jwksKeys(t, ring), *mid)
	require.ErrorIs(t, err, issuer.ErrLotteryNotDrawn)

	clk.Set(v.Chain.RoundTime(round))
	res, err = is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, k, res.Placed)
	assert.Equal(t, k, res.Admitted)
	after, err := is.RoomLottery(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, before.Commitment, after.Commitment)
	assert.Equal(t, v.Rounds[1].Signature, after.BeaconSignature)
	assert.Equal(t, issuer.LotterySeed(room, after.Epoch, after.Secret, v.Rounds[1].Randomness, after.Entrants), after.Seed)
	_, byUser := admittedOrder(t, rdb, room)
	places := map[int64]bool{}
	for u, r := range receipts {
		c, err := issuer.VerifyReceipt(ctx, r, jwksKeys(t, ring), *after)
		require.NoError(t, err, u)
		assert.Empty(t, c.Influence, "with a beacon no place could be steered")
		assert.Equal(t, v.Rounds[1].Randomness, c.Randomness)
		assert.Equal(t, byUser[u], c.Claims.Arrival)
		places[c.Place] = true
	}
	assert.Len(t, places, k)

	// A changed seed, secret or signature in the view is refused.
	bad := *after
	bad.BeaconSignature = v.Rounds[0].Signature
	_, err = issuer.VerifyReceipt(ctx, receipts["b1"], jwksKeys(t, ring), bad)
	require.ErrorIs(t, err, issuer.ErrBeaconInvalid)
	bad = *after
	bad.Seed = "0123456789abcdef0123456789abcdef"
	_, err = issuer.VerifyReceipt(ctx, receipts["b1"], jwksKeys(t, ring), bad)
	require.ErrorIs(t, err, issuer.ErrSeedMismatch)
	bad = *after
	bad.Source, bad.Beacon = issuer.OperatorChosen, nil
	_, err = issuer.VerifyReceipt(ctx, receipts["b1"], jwksKeys(t, ring), bad)
	require.ErrorIs(t, err, issuer.ErrSeedMismatch, "the receipt promised a beacon")
}

// TestLotteryRerollShows: the re-rolls of the issue 36 audit. HDEL of the
// seed followed by a PUT gives the same commitment (the secret is derived,
// not drawn); a seed written into the store by hand, or an issuer with
// another key, shows as a second commitment on the room view, and the
// influence names the re-roll; the journal holds every commitment with why.
func TestLotteryRerollShows(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	clk := newClock()
	is := newIssuer(t, rdb, clk)
	room := redistest.Room("reroll")
	cfg := issuer.RoomConfig{Capacity: 10, RatePerMinute: 600, Opens: clk.Now().Add(time.Hour), PreQueue: issuer.PreQueueShuffle}
	_, err := is.SetRoom(ctx, room, cfg)
	require.NoError(t, err)
	e, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	first, err := is.RoomLottery(ctx, room)
	require.NoError(t, err)
	require.Len(t, first.Commitments, 1)
	assert.Equal(t, "configured", first.Commitments[0].Why)
	assert.Equal(t, e.LotteryCommitment, first.Commitment)

	// HDEL + PUT: the same commitment, no second record.
	ck := issuer.RoomKeys(room)[0]
	require.NoError(t, rdb.HDel(ctx, ck, "lottery_seed").Err())
	_, err = is.SetRoom(ctx, room, cfg)
	require.NoError(t, err)
	again, err := is.RoomLottery(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, first.Commitment, again.Commitment, "a derived secret cannot be re-rolled by a PUT")
	assert.Len(t, again.Commitments, 1)
	assert.NotContains(t, again.Influence(), "re-roll")

	// A seed written by hand: a new, visible commitment.
	require.NoError(t, rdb.HSet(ctx, ck, "lottery_seed", "0123456789abcdef0123456789abcdef").Err())
	raw, err := is.RoomLottery(ctx, room)
	require.NoError(t, err)
	assert.NotEqual(t, first.Commitment, raw.Commitment)
	require.Len(t, raw.Commitments, 2)
	assert.Equal(t, "unrecorded", raw.Commitments[1].Why)
	assert.Contains(t, raw.Influence(), "re-roll")

	// An issuer with another key, at the draw: recorded and flagged.
	require.NoError(t, rdb.HSet(ctx, ck, "lottery_seed", issuer.LotteryPending).Err())
	other := newIssuer(t, rdb, clk, func(c *issuer.Config) { c.LotteryKey = []byte("another key entirely, 32 bytes!!") })
	clk.Set(cfg.Opens)
	_, err = other.Tick(ctx, room)
	require.NoError(t, err)
	drawn, err := other.RoomLottery(ctx, room)
	require.NoError(t, err)
	require.Len(t, drawn.Commitments, 2)
	assert.Equal(t, "at the draw", drawn.Commitments[1].Why)
	assert.Contains(t, drawn.Influence(), "2 different commitments")
	evs, err := rdb.XRange(ctx, issuer.RoomKeys(room)[16], "-", "+").Result()
	require.NoError(t, err)
	var whys []string
	for _, ev := range evs {
		if ev.Values["action"] == issuer.ActionLotteryCommit {
			var d map[string]string
			require.NoError(t, json.Unmarshal([]byte(ev.Values["detail"].(string)), &d))
			whys = append(whys, d["why"])
		}
	}
	assert.Equal(t, []string{"configured", "configured"}, whys, "every commitment event says why")
}

// TestRestoreJournalsItsCommitment: a shuffle room restored from the journal
// before its draw keeps its epoch, so its derived secret and commitment; the
// issuer's next tick journals a lottery_commit event with why "restored";
// the room view shows no second commitment.
func TestRestoreJournalsItsCommitment(t *testing.T) {
	ctx := context.Background()
	is, clk, room, rdb := setup(t, issuer.RoomConfig{Capacity: 1, RatePerMinute: 6000, State: issuer.RoomPaused,
		PreQueue: issuer.PreQueueShuffle})
	entries := map[string]*issuer.Entry{}
	for i := range 5 {
		e, err := is.Enter(ctx, room, "r"+strconv.Itoa(i))
		require.NoError(t, err)
		entries[e.User] = e
	}
	before, err := is.RoomLottery(ctx, room)
	require.NoError(t, err)
	st := journaled(t, rdb, room, entries, clk.Now())
	require.NoError(t, rdb.FlushAll(ctx).Err())
	_, err = issuer.Restore(ctx, rdb, room, st, clk.Now())
	require.NoError(t, err)
	_, err = is.Tick(ctx, room)
	require.NoError(t, err)
	after, err := is.RoomLottery(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, before.Commitment, after.Commitment, "same epoch, same secret: a restore cannot re-roll")
	for _, r := range after.Commitments {
		assert.Equal(t, before.Commitment, r.Commitment, "one commitment on record: %+v", r)
	}
	assert.NotContains(t, after.Influence(), "re-roll")
	evs, err := rdb.XRange(ctx, issuer.RoomKeys(room)[16], "-", "+").Result()
	require.NoError(t, err)
	found := false
	for _, ev := range evs {
		if ev.Values["action"] == issuer.ActionLotteryCommit {
			var d map[string]string
			require.NoError(t, json.Unmarshal([]byte(ev.Values["detail"].(string)), &d))
			found = found || d["why"] == "restored" && d["commitment"] == before.Commitment
		}
	}
	assert.True(t, found, "the journal holds the restored room's commitment")
}
