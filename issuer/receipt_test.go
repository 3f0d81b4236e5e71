package issuer_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/verifier"
)

// jwksKeys is the ring's public JWK Set as a third party reads it.
func jwksKeys(t *testing.T, ring *keys.Ring) *verifier.StaticKeys {
	t.Helper()
	b, err := ring.PublicJWKS()
	require.NoError(t, err)
	ks, err := verifier.ParseJWKS(b)
	require.NoError(t, err)
	return ks
}

// TestReceiptProvesDrawnPlace: every pre-queue entrant gets a join receipt
// under the commitment the public room view shows (the seed itself stays
// secret, and the commitment is journaled); after the draw the room view
// shows seed, epoch and cutoff, and each receipt signed before the draw
// proves its holder's drawn place — the place the line then gives them —
// from the receipt, the JWKS and the room view alone.
func TestReceiptProvesDrawnPlace(t *testing.T) {
	ctx := context.Background()
	opensIn := time.Minute
	is, clk, room, rdb, ring := laneSetup(t, issuer.RoomConfig{Capacity: 1, RatePerMinute: 6000,
		Opens: newClock().Now().Add(opensIn), PreQueue: issuer.PreQueueShuffle})
	opens := clk.Now().Add(opensIn)

	before, err := is.RoomLottery(ctx, room)
	require.NoError(t, err)
	assert.False(t, before.Drawn)
	assert.Empty(t, before.Seed, "secret before the draw")
	require.Len(t, before.Commitment, 64, "SHA-256 hex")
	require.Len(t, before.CommitmentSHA1, 40, "the deprecated SHA-1, one release")
	st, err := is.Stats(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, st.Lottery.Commitment, before.CommitmentSHA1, "the admin stats' commitment, unchanged")

	// Journaled as soon as the seed exists.
	evs, err := rdb.XRange(ctx, issuer.RoomKeys(room)[16], "-", "+").Result()
	require.NoError(t, err)
	var journaled string
	for _, ev := range evs {
		if ev.Values["kind"] == "audit" && ev.Values["action"] == issuer.ActionLotteryCommit {
			assert.Equal(t, before.Epoch, ev.Values["epoch"])
			var d map[string]string
			require.NoError(t, json.Unmarshal([]byte(ev.Values["detail"].(string)), &d))
			journaled = d["commitment"]
		}
	}
	assert.Equal(t, before.Commitment, journaled)

	const pre = 25
	receipts := map[string]string{}
	toks := map[string]string{}
	for i := 1; i <= pre; i++ {
		u := "p" + strconv.Itoa(i)
		e, err := is.Enter(ctx, room, u)
		require.NoError(t, err)
		require.True(t, e.PreQueue)
		assert.Equal(t, before.Commitment, e.LotteryCommitment, u)
		require.NotEmpty(t, e.Receipt, u)
		receipts[u], toks[u] = e.Receipt, e.WaitingToken
	}
	s, err := is.Status(ctx, room, "p3", toks["p3"])
	require.NoError(t, err)
	assert.NotEmpty(t, s.Receipt, "status in the pre-queue carries one too")
	assert.Equal(t, before.Commitment, s.LotteryCommitment)

	// The receipt is no admission token.
	v, err := verifier.New(jwksKeys(t, ring), verifier.Config{Issuer: "https://issuer.test", Audience: "orders", Product: room})
	require.NoError(t, err)
	_, err = v.Verify(ctx, receipts["p1"], verifier.Expect{})
	require.ErrorIs(t, err, verifier.ErrBadType, "refused by its typ")

	// Not provable before the draw.
	ks := jwksKeys(t, ring)
	_, err = issuer.VerifyReceipt(ctx, receipts["p1"], ks, *before)
	require.ErrorIs(t, err, issuer.ErrLotteryNotDrawn)

	clk.Set(opens)
	late, err := is.Enter(ctx, room, "late")
	require.NoError(t, err)
	assert.False(t, late.PreQueue)
	assert.Empty(t, late.Receipt, "after the opening: no pre-queue, no receipt")
	assert.Empty(t, late.LotteryCommitment)
	_, err = is.Tick(ctx, room)
	require.NoError(t, err)

	after, err := is.RoomLottery(ctx, room)
	require.NoError(t, err)
	require.True(t, after.Drawn)
	assert.Equal(t, before.Commitment, after.Commitment)
	assert.Equal(t, before.Epoch, after.Epoch)
	assert.EqualValues(t, pre, after.Cutoff)
	require.Len(t, after.Seed, 32)
	assert.False(t, after.PlacedAt.IsZero())

	places := map[int64]bool{}
	for i := 1; i <= pre; i++ {
		u := "p" + strconv.Itoa(i)
		c, err := issuer.VerifyReceipt(ctx, receipts[u], ks, *after)
		require.NoError(t, err, u)
		assert.Equal(t, u, c.Claims.Sub)
		assert.EqualValues(t, i, c.Claims.Arrival)
		assert.Equal(t, room, c.Claims.Room)
		assert.Equal(t, "https://issuer.test", c.Claims.Iss)
		places[c.Place] = true
		st, err := is.Status(ctx, room, u, toks[u])
		require.NoError(t, err)
		if c.Place == 1 {
			assert.Equal(t, flashgate.StateActive, st.State, "drawn first: admitted (capacity 1)")
		} else {
			require.Equal(t, flashgate.StateWaiting, st.State, u)
			assert.Equal(t, c.Place-1, st.Position, u+": the drawn place is the place in line, behind the one admitted")
		}
	}
	assert.Len(t, places, pre, "a permutation")

	// Refusals.
	changed := *after
	changed.Seed = strings.Repeat("0", 32)
	_, err = issuer.VerifyReceipt(ctx, receipts["p2"], ks, changed)
	require.ErrorIs(t, err, issuer.ErrSeedMismatch, "a changed seed")

	other, err := keys.Generate(clk.Now())
	require.NoError(t, err)
	forged, err := other.SignReceipt(receiptPayload(t, receipts["p2"]))
	require.NoError(t, err)
	_, err = issuer.VerifyReceipt(ctx, forged, ks, *after)
	require.ErrorIs(t, err, issuer.ErrReceiptInvalid, "signed by a key the JWKS does not publish")

	parts := strings.Split(receipts["p2"], ".")
	var claims flashgate.ReceiptClaims
	require.NoError(t, json.Unmarshal(receiptPayload(t, receipts["p2"]), &claims))
	claims.Arrival = 1 // claim an earlier arrival with p2's signature
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(claims.JSON()) + "." + parts[2]
	_, err = issuer.VerifyReceipt(ctx, tampered, ks, *after)
	require.ErrorIs(t, err, issuer.ErrReceiptInvalid, "a tampered payload")

	adm, err := ring.Sign(receiptPayload(t, receipts["p2"]))
	require.NoError(t, err)
	_, err = issuer.VerifyReceipt(ctx, adm, ks, *after)
	require.ErrorIs(t, err, issuer.ErrReceiptInvalid, "an admission token's typ")

	// Another room's receipt, against this room's view.
	room2 := redistest.Room("lottery2")
	_, err = is.SetRoom(ctx, room2, issuer.RoomConfig{Capacity: 1, RatePerMinute: 60, Opens: clk.Now().Add(time.Hour),
		PreQueue: issuer.PreQueueShuffle})
	require.NoError(t, err)
	e2, err := is.Enter(ctx, room2, "p1")
	require.NoError(t, err)
	require.NotEmpty(t, e2.Receipt)
	_, err = issuer.VerifyReceipt(ctx, e2.Receipt, ks, *after)
	require.ErrorIs(t, err, issuer.ErrReceiptOtherRoom)
}

func receiptPayload(t *testing.T, tok string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
	require.NoError(t, err)
	return b
}

// TestLotteryPlaceMatchesOrder: LotteryPlace (public data only: seed,
// epoch, cutoff) is the rank LotteryOrder, the draw's order, gives; the
// commitment is the documented SHA-256.
func TestLotteryPlaceMatchesOrder(t *testing.T) {
	const cutoff = 300
	seqs := make([]int64, cutoff)
	for i := range seqs {
		seqs[i] = int64(i + 1)
	}
	l := issuer.Lottery{Seed: "00112233445566778899aabbccddeeff", Drawn: true, Cutoff: cutoff, Bits: issuer.LotteryBits(cutoff)}
	for i, s := range issuer.LotteryOrder(l, "ep0ch", seqs) {
		require.EqualValues(t, i+1, issuer.LotteryPlace(l.Seed, "ep0ch", cutoff, s), s)
	}
	// Known answer (Python: hashlib.sha256(b"flashgate lottery commitment v1\x00sku-1\x00mhx2k0r1ab\x00" + seed)).
	assert.Equal(t, "c5e2c50553a30134764790bb0751000b4d8728902d9205efecf1636d8881bb8f",
		issuer.LotteryCommitment("sku-1", "mhx2k0r1ab", l.Seed))
	assert.NotEqual(t, issuer.LotteryCommitment("a", "b", "c"), issuer.LotteryCommitment("a", "bc", ""),
		"fields are separated")
}
