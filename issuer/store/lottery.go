package store

import (
	"context"

	"github.com/flashgate/flashgate/internal/roomkey"
)

// LotteryFix runs lua/lottery.lua's 'fix' step: records the entrant digest,
// entrant count, beacon round (0: none) and time (ms) of room's drawn
// lottery, once. It reports whether it wrote.
func (g *Gateway) LotteryFix(ctx context.Context, room, epoch, entrants string, n int64, round uint64, nowMs int64) (bool, error) {
	return g.lottery(ctx, room, epoch, "fix", entrants, n, round, nowMs)
}

// LotteryReveal runs lua/lottery.lua's 'reveal' step: publishes the secret,
// the draw's seed and the beacon signature ("" none) of room's lottery
// while its seed is pending. It reports whether it wrote.
func (g *Gateway) LotteryReveal(ctx context.Context, room, epoch, secret, seed, beaconSig string) (bool, error) {
	return g.lottery(ctx, room, epoch, "reveal", secret, seed, beaconSig)
}

func (g *Gateway) lottery(ctx context.Context, room string, args ...any) (bool, error) {
	n, err := lotteryScript.Run(ctx, g.rdb, []string{roomkey.Key(room, roomkey.Config)}, args...).Int()
	if err != nil {
		return false, Unavailable(err)
	}
	return n == 1, nil
}
