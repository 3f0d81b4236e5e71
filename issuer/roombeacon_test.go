package issuer_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/verifier"
)

// beaconOf reads room's beacon from is and checks its signature as a page's
// worker would (verifier.VerifyBeacon over the ring's keys).
func beaconOf(t *testing.T, is *issuer.Issuer, ring *keys.Ring, now time.Time, room string) *verifier.Beacon {
	t.Helper()
	claims, tok, err := is.RoomBeacon(context.Background(), room, 5*time.Second, 7*time.Second)
	require.NoError(t, err)
	v, err := verifier.New(ring, verifier.Config{Issuer: "https://issuer.test", Audience: "orders", Now: func() time.Time { return now }})
	require.NoError(t, err)
	b, err := v.VerifyBeacon(context.Background(), tok, room)
	require.NoError(t, err)
	// The signed payload is the returned one, field for field (flashgate.BeaconClaims = verifier.Beacon).
	var want verifier.Beacon
	raw, _ := json.Marshal(claims)
	require.NoError(t, json.Unmarshal(raw, &want))
	require.Equal(t, &want, b)
	_, err = v.Verify(context.Background(), tok, verifier.Expect{Product: room})
	require.ErrorIs(t, err, verifier.ErrBadType, "a beacon is never an admission token")
	_, err = issuer.VerifyReceipt(context.Background(), tok, ring, issuer.RoomLottery{Room: room})
	require.ErrorIs(t, err, issuer.ErrReceiptInvalid, "nor a join receipt")
	return b
}

// TestRoomBeaconPlaceBound holds the beacon's place to its stated bound
// against the exact status script, on a real redis-server: 1,500 buyers,
// six rounds of random leaves (seeded) and admissions; in every round every
// waiting buyer's place from the beacon is within the number of arrivals of
// its bucket no longer waiting (exact when none), and an admitted buyer is
// told to ask its status.
func TestRoomBeaconPlaceBound(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	ring, err := keys.Generate(clk.Now())
	require.NoError(t, err)
	rdb := redistest.Start(t).Client(t)
	is := newIssuer(t, rdb, clk, func(c *issuer.Config) { c.Signer = ring; c.StatusSnapshot = -1 })
	room := redistest.Room("beacon")
	_, err = is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 100_000, RatePerMinute: 6000, State: issuer.RoomPaused,
		PageMessage: "soon"})
	require.NoError(t, err)
	const n = 1500
	toks := make([]string, n+1)
	for i := 1; i <= n; i++ {
		e, err := is.Enter(ctx, room, "u"+strconv.Itoa(i))
		require.NoError(t, err)
		require.EqualValues(t, i, e.Arrival)
		toks[i] = e.WaitingToken
	}
	b := beaconOf(t, is, ring, clk.Now(), room)
	// Nor is it an invite: no entry through a lane with it.
	_, tok, err := is.RoomBeacon(ctx, room, 5*time.Second, 7*time.Second)
	require.NoError(t, err)
	_, err = is.EnterWithInvite(ctx, room, "intruder", tok)
	require.ErrorIs(t, err, flashgate.ErrInviteInvalid, "a beacon is no invite")
	require.Equal(t, "paused", b.State)
	require.Equal(t, "soon", b.PageMessage)
	require.EqualValues(t, 1, b.Head)
	require.EqualValues(t, n, b.Tail)
	require.EqualValues(t, n, b.TotalWaiting)
	require.LessOrEqual(t, len(b.Buckets), issuer.BeaconBuckets)
	require.Equal(t, [2]int64{1, 1}, b.Buckets[0], "one arrival wide at the head")
	require.Equal(t, [2]int64{n, n}, b.Buckets[len(b.Buckets)-1])

	rng := rand.New(rand.NewPCG(34, 2026))
	gone := make([]bool, n+1)
	exactCount, bounded := 0, 0
	for round := range 6 {
		for i := 1; i <= n; i++ {
			if !gone[i] && rng.IntN(100) < 8 {
				require.NoError(t, is.Leave(ctx, room, "u"+strconv.Itoa(i), toks[i]))
				gone[i] = true
			}
		}
		// Admissions: open for a few ticks, then pause so that the line holds still.
		_, err = is.SetState(ctx, room, issuer.RoomOpen)
		require.NoError(t, err)
		for range 1 + rng.IntN(3) {
			clk.Advance(time.Second)
			_, err = is.Tick(ctx, room)
			require.NoError(t, err)
		}
		_, err = is.SetState(ctx, room, issuer.RoomPaused)
		require.NoError(t, err)

		b := beaconOf(t, is, ring, clk.Now(), room)
		for i := 1; i <= n; i++ {
			if gone[i] {
				continue
			}
			e, err := is.Status(ctx, room, "u"+strconv.Itoa(i), toks[i])
			require.NoError(t, err)
			place, maxErr, ok := b.Place(int64(i))
			if e.State != flashgate.StateWaiting {
				require.False(t, ok, "round %d: u%d is %s, the beacon must send it to its status", round, i, e.State)
				gone[i] = true
				continue
			}
			require.True(t, ok, "round %d: u%d waits at %d", round, i, e.Position)
			require.False(t, e.PositionEstimated)
			diff := place - e.Position
			require.LessOrEqual(t, max(diff, -diff), maxErr, "round %d: u%d at %d, the beacon says %d ± %d", round, i, e.Position, place, maxErr)
			if maxErr == 0 {
				exactCount++
			} else {
				bounded++
			}
			require.EqualValues(t, e.TotalWaiting, b.TotalWaiting)
		}
	}
	require.Positive(t, exactCount, "buckets nobody left place exactly")
	require.Positive(t, bounded, "the leaves made some buckets inexact")
	t.Logf("places checked: %d exact (bound 0), %d within their bucket's leaves", exactCount, bounded)
}

// TestRoomBeaconClosed: a closed room's beacon says so, with the reason;
// no beacon goes out unsigned, nor for an unknown room.
func TestRoomBeaconClosed(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	ring, err := keys.Generate(clk.Now())
	require.NoError(t, err)
	rdb := redistest.Start(t).Client(t)
	is := newIssuer(t, rdb, clk, func(c *issuer.Config) { c.Signer = ring })
	room := redistest.Room("beacon")
	_, err = is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 10, RatePerMinute: 60, State: issuer.RoomPaused})
	require.NoError(t, err)
	for i := 1; i <= 5; i++ {
		_, err := is.Enter(ctx, room, "u"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	_, err = is.Close(ctx, room, "sold_out")
	require.NoError(t, err)
	b := beaconOf(t, is, ring, clk.Now(), room)
	require.Equal(t, "closed", b.State)
	require.Equal(t, "sold_out", b.CloseReason)

	// A signer that does not sign beacons: unavailable, never unsigned.
	plain := newIssuer(t, rdb, clk)
	_, _, err = plain.RoomBeacon(ctx, room, 5*time.Second, time.Second)
	require.ErrorIs(t, err, flashgate.ErrUnavailable)
	_, _, err = is.RoomBeacon(ctx, "no-such-room-"+room, 5*time.Second, time.Second)
	require.ErrorIs(t, err, flashgate.ErrUnknownRoom)
}
