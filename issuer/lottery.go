package issuer

import (
	"cmp"
	"crypto/sha1" //nolint:gosec // SHA-1 as Redis's redis.sha1hex computes it: the PRF the scripts use, not a signature
	"encoding/binary"
	"slices"
	"strconv"
	"time"
)

// PreQueue is how a room orders its pre-queue: everyone who entered before
// the room first opened (RoomConfig.PreQueue; docs/rooms.md#pre-queue-lottery).
type PreQueue string

// Pre-queue orders.
const (
	// PreQueueFIFO keeps the pre-queue in arrival order (the default).
	PreQueueFIFO PreQueue = "fifo"
	// PreQueueShuffle draws the pre-queue's order uniformly at random, once,
	// when the room first opens.
	PreQueueShuffle PreQueue = "shuffle"
)

// Lottery is the record of a room's pre-queue lottery (Stats.Lottery).
//
// How it works (lua/prelude_config.lua draw_lottery): the first script of any
// kind that finds a shuffle room open in effect records Cutoff, the arrival
// counter at that moment — entries with arrival numbers 1 … Cutoff entered
// before the opening, and no later arrival is ever drawn (enter records it
// before it numbers anyone). From then on the order is fixed: pre-queue
// entry s sorts by LotteryScore(Seed, epoch, Bits, s), ascending. The tick
// then moves the entries to those scores, at most MaxTickPerCall per script
// call, and admits nobody until it is done (PlacedAt); later arrivals queue
// behind all of them in arrival order.
//
// Audit: with Seed (shown once Cutoff is recorded, never before), the room's
// epoch (Stats.Epoch) and Cutoff, anyone recomputes the order of the
// pre-queue's arrival numbers (LotteryOrder) and compares it with the
// admission order (admission ids carry both numbers). Commitment — the SHA-1
// of the seed, shown from the moment the seed exists — lets buyers check
// afterwards that the seed was not changed once the pre-queue was known.
type Lottery struct {
	// Seed is the secret seed (32 hex digits, 128 bits from crypto/rand);
	// "" until the draw.
	Seed string
	// Commitment is the SHA-1 (hex) of Seed, shown before the draw too.
	Commitment string
	// Drawn is true once the cutoff is recorded: the order is fixed.
	Drawn bool
	// Cutoff is the last arrival number in the pre-queue (0: nobody; only
	// when Drawn).
	Cutoff int64
	// Bits is the number of low score bits that carry the arrival number
	// (the smallest b ≥ 1 with 2^b > Cutoff).
	Bits int
	// DrawnAt is when the cutoff was recorded (the opening, by the room's
	// clock); PlacedAt when the last pre-queue entry was moved to its place
	// (zero until then: admissions wait for it).
	DrawnAt, PlacedAt time.Time
	// Placed counts the pre-queue entries moved to their lottery place
	// (entries that left or were admitted before are not counted).
	Placed int64
}

// newLotterySeed returns what a new shuffle room stores as its lottery_seed:
// LotteryPending. The secret is derived from the issuer's key at the draw
// (lottery_reveal.go), never stored before it.
func newLotterySeed() string { return LotteryPending }

// LotteryBits returns the score bits a lottery with cutoff reserves for
// arrival numbers: the smallest b ≥ 1 with 2^b > cutoff.
func LotteryBits(cutoff int64) int {
	b := 1
	for int64(1)<<b <= cutoff {
		b++
	}
	return b
}

// LotteryScore returns the score the pre-queue lottery gives arrival number
// seq (1 … cutoff, bits = LotteryBits(cutoff)) in the room's waiting line, as
// lua/prelude_epoch.lua lottery_score computes it:
//
//	−2^53 + h·2^bits + seq,  h = the top 53 − bits bits of the first 52 bits of
//	SHA-1(seed ":" epoch ":" seq)
//
// Negative (every drawn entry is ahead of every later arrival, whose score
// is its arrival number), exact in a float64, and unique (seq is in the low
// bits). Entries with equal h (probability 2^−(53−bits) for a pair) keep
// arrival order: of two pre-queue entries the earlier is ahead with
// probability 1/2 + 2^−(54−bits) instead of 1/2.
func LotteryScore(seed, epoch string, bits int, seq int64) int64 {
	sum := sha1.Sum([]byte(seed + ":" + epoch + ":" + strconv.FormatInt(seq, 10))) //nolint:gosec // see import
	h := binary.BigEndian.Uint64(sum[:8]) >> 12                                    // the first 52 bits (13 hex digits)
	h >>= uint(bits - 1)                                                           // their top 53 − bits
	return -(int64(1) << 53) + int64(h)<<bits + seq
}

// LotteryOrder returns seqs (pre-queue arrival numbers, each ≤ l.Cutoff) in
// the order the lottery l of a room with epoch places them: the order they
// wait, and are admitted, in.
func LotteryOrder(l Lottery, epoch string, seqs []int64) []int64 {
	out := slices.Clone(seqs)
	score := make(map[int64]int64, len(out))
	for _, s := range out {
		score[s] = LotteryScore(l.Seed, epoch, l.Bits, s)
	}
	slices.SortFunc(out, func(a, b int64) int { return cmp.Compare(score[a], score[b]) })
	return out
}
