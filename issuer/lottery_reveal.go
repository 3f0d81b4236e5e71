package issuer

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The derived-seed lottery (docs/rooms.md#the-draw-bit-for-bit). The
// committed secret is never in Redis before the draw: it is derived from a key the issuer holds (Config.LotteryKey) over the room and
// its epoch, so anyone who reads the store — every key of the room — learns
// nothing of the order. Redis holds lottery_seed "pending" until the cutoff;
// then the issuer (revealLottery, from the tick)
//
//  1. fixes the entrant list: the digest of the pre-queue still waiting at
//     the cutoff (EntrantDigest), its count, and the beacon round (the first
//     drand round at or after opens_at + BeaconDelay; 0 without a beacon);
//  2. once that round is published (at once without a beacon), reveals the
//     secret and the draw's seed LotterySeed(room, epoch, secret, beacon
//     randomness, entrant digest), which the tick then places the line by.
//
// With a beacon nobody knows the seed before the round's time, operator
// included; without one ("operator-chosen seed") whoever holds the issuer's
// key knows it once the entrant list is fixed.

// LotteryPending is lottery_seed's value while the derived secret is not
// revealed (before the draw, and until the beacon round is published).
const LotteryPending = "pending"

// OperatorChosen names a lottery without a beacon: the room view, the page
// and every receipt say so.
const OperatorChosen = "operator-chosen seed"

// Domains of the derived lottery's hashes (LotterySecret, EntrantLeaf, LotterySeed).
const (
	secretDomain  = "flashgate lottery secret v2\x00"
	entrantDomain = "flashgate lottery entrant v2\x00"
	seedDomain    = "flashgate lottery seed v2\x00"
)

// LotterySecret returns the committed secret of room's lottery in epoch:
// the first 32 lowercase hex digits of HMAC-SHA256(key, "flashgate lottery
// secret v2" NUL room NUL epoch). The same key, room and epoch always give
// the same secret, so re-running a configuration or a restore cannot
// re-roll it.
func LotterySecret(key []byte, room, epoch string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(secretDomain + room + "\x00" + epoch))
	return hex.EncodeToString(m.Sum(nil))[:32]
}

// Entrant is one pre-queue entry at the cutoff: arrival number and user id.
type Entrant struct {
	Seq  int64
	User string
}

// EntrantLeaf is an entrant's line in the entrant digest: the lowercase hex
// SHA-256 of "flashgate lottery entrant v2" NUL room NUL epoch NUL seq
// (decimal) NUL user. A buyer computes their own from their receipt.
func EntrantLeaf(room, epoch string, e Entrant) string {
	sum := sha256.Sum256([]byte(entrantDomain + room + "\x00" + epoch + "\x00" + strconv.FormatInt(e.Seq, 10) + "\x00" + e.User))
	return hex.EncodeToString(sum[:])
}

// EntrantDigest returns the digest of a pre-queue's entrants (in ascending
// arrival order): the lowercase hex SHA-256 of the concatenated lines
// "<seq> <EntrantLeaf>\n"; of no entrant, SHA-256 of "".
func EntrantDigest(room, epoch string, es []Entrant) string {
	h := sha256.New()
	for _, e := range es {
		h.Write([]byte(strconv.FormatInt(e.Seq, 10) + " " + EntrantLeaf(room, epoch, e) + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// LotterySeed returns the seed the draw uses (the seed of LotteryScore):
// the first 32 lowercase hex digits of SHA-256("flashgate lottery seed v2"
// NUL room NUL epoch NUL secret NUL randomness NUL entrants), randomness
// being the beacon round's (hex; "" without a beacon) and entrants the
// EntrantDigest.
func LotterySeed(room, epoch, secret, randomness, entrants string) string {
	sum := sha256.Sum256([]byte(seedDomain + room + "\x00" + epoch + "\x00" + secret + "\x00" + randomness + "\x00" + entrants))
	return hex.EncodeToString(sum[:])[:32]
}

// revealRecheck is how long revealLottery trusts that a room's seed is out
// before it reads the config again (a restore may put a pending seed back).
const revealRecheck = 5 * time.Second

// beaconRetry is how long revealLottery waits after a failed beacon request.
const beaconRetry = time.Second

// ActionLotteryReveal is the audit event revealLottery journals (detail:
// commitment, secret, seed, entrants, entrants_n, round, signature).
const ActionLotteryReveal = "lottery_reveal"

// lotteryKeyOf returns the key lottery secrets derive from: Config.LotteryKey;
// else, when the waiting secret is the operator's (not shared through
// Redis), a key derived from it; else a random key of this process, with a
// warning (replicas then disagree: set FLASHGATE_LOTTERY_KEY).
func lotteryKeyOf(cfg Config, warn func(string)) []byte {
	switch {
	case len(cfg.LotteryKey) > 0:
		return cfg.LotteryKey
	case len(cfg.WaitingSecret) > 0 && !cfg.SharedSecret:
		m := hmac.New(sha256.New, cfg.WaitingSecret)
		m.Write([]byte("flashgate lottery key v2"))
		return m.Sum(nil)
	}
	var b [32]byte
	_, _ = rand.Read(b[:])
	warn("no lottery key (Config.LotteryKey / FLASHGATE_LOTTERY_KEY) and the waiting secret is shared through Redis: lottery secrets derive from a key of this process, which other replicas do not share")
	return b[:]
}

// revealLottery moves room's derived-seed lottery on after its cutoff: it
// fixes the entrant list, then reveals the seed once the beacon round is
// published (see above). Called by Tick for shuffle rooms; a room whose
// lottery is done (or not derived) is remembered and costs nothing after.
// Failures are logged and retried at the next tick: nobody is admitted
// while the seed is pending. It reports whether it revealed the seed now.
func (is *core) revealLottery(ctx context.Context, room string, now time.Time) bool {
	if at, done := is.revealed.Load(room); done && now.Sub(at.(time.Time)) < revealRecheck && now.Sub(at.(time.Time)) >= 0 {
		return false
	}
	ck := roomKeys(room)[0]
	m, err := is.cfg.Redis.HGetAll(ctx, ck).Result()
	if err != nil || len(m) == 0 {
		return false
	}
	if m["lottery_restored_ms"] != "" { // Restore wrote the room: journal what it will draw
		is.journalCommitmentWhy(ctx, room, "restored")
		_ = is.cfg.Redis.HSet(ctx, ck, "lottery_restored_ms", "").Err()
	}
	if m["lottery_cutoff"] == "" {
		return false // not drawn yet
	}
	epoch := m["epoch"]
	if m["lottery_seed"] != LotteryPending {
		is.revealed.Store(room, now) // revealed, or a lottery of before v2 (its seed was stored)
		return false
	}
	if m["lottery_entrants"] == "" {
		cutoff, _ := strconv.ParseInt(m["lottery_cutoff"], 10, 64)
		es, err := is.preQueueEntrants(ctx, room, cutoff)
		if err != nil {
			is.log.Warn("lottery: read the pre-queue", "room", room, "err", err)
			return false
		}
		var round uint64
		if b := is.cfg.Beacon; b != nil {
			round = b.Chain.LotteryRound(lotteryOpens(m))
		}
		if _, err := is.db.LotteryFix(ctx, room, epoch, EntrantDigest(room, epoch, es), int64(len(es)), round, now.UnixMilli()); err != nil {
			is.log.Warn("lottery: fix the entrants", "room", room, "err", err)
			return false
		}
		if m, err = is.cfg.Redis.HGetAll(ctx, ck).Result(); err != nil || m["lottery_entrants"] == "" {
			return false
		}
	}
	if v, err := is.RoomLottery(ctx, room); err == nil && v.Commitment != "" {
		is.recordCommitment(ctx, room, v, "at the draw") // another key than the one committed with shows as a re-roll
	}
	secret := LotterySecret(is.lotteryKey, room, epoch)
	round, _ := strconv.ParseUint(m["lottery_round"], 10, 64)
	var randomness, sig string
	if round > 0 {
		b := is.cfg.Beacon
		if b == nil {
			is.log.Warn("lottery: the room's beacon round is set but this replica has no beacon (Config.Beacon)", "room", room, "round", round)
			return false
		}
		if now.Before(b.Chain.RoundTime(round)) {
			return false // not due: no request
		}
		br, rnd, err := b.Round(ctx, round, now)
		if err != nil {
			if !errors.Is(err, ErrBeaconNotYet) {
				is.log.Warn("lottery: beacon round", "room", room, "round", round, "err", err)
			}
			// Ask the relay again in beaconRetry, not at every tick: Run ticks
			// rooms one after another, and a slow relay must not slow them all.
			is.revealed.Store(room, now.Add(beaconRetry-revealRecheck))
			return false
		}
		randomness, sig = rnd, br.Signature
	}
	seed := LotterySeed(room, epoch, secret, randomness, m["lottery_entrants"])
	wrote, err := is.db.LotteryReveal(ctx, room, epoch, secret, seed, sig)
	if err != nil {
		is.log.Warn("lottery: reveal", "room", room, "err", err)
		return false
	}
	is.revealed.Store(room, now)
	if !wrote {
		return false
	}
	detail, _ := json.Marshal(map[string]string{"commitment": LotteryCommitment(room, epoch, secret), "secret": secret,
		"seed": seed, "entrants": m["lottery_entrants"], "entrants_n": m["lottery_entrants_n"],
		"round": strconv.FormatUint(round, 10), "signature": sig})
	if _, err := is.journalAudit(ctx, room, Audit{Actor: "issuer", Action: ActionLotteryReveal, Detail: detail}); err != nil {
		is.log.Warn("journal the lottery reveal", "room", room, "err", err)
	}
	return true
}

// lotteryOpens is when a drawn room opened for its beacon round: opens_ms,
// or the cutoff's time (lottery_ms) for a room opened without one.
func lotteryOpens(m map[string]string) time.Time {
	if ms, _ := strconv.ParseInt(m["opens_ms"], 10, 64); ms > 0 {
		return time.UnixMilli(ms)
	}
	ms, _ := strconv.ParseInt(m["lottery_ms"], 10, 64)
	return time.UnixMilli(ms)
}

// preQueueEntrants reads room's pre-queue entries still at their arrival
// numbers 1 … cutoff (not placed: the seed is pending), in arrival order,
// a page of 10,000 at a time.
func (is *core) preQueueEntrants(ctx context.Context, room string, cutoff int64) ([]Entrant, error) {
	const page = 10000
	var out []Entrant
	wk := roomKeys(room)[1]
	for start := int64(0); ; start += page {
		zs, err := is.cfg.Redis.ZRangeWithScores(ctx, wk, start, start+page-1).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, unavailable(err)
		}
		for _, z := range zs {
			s := int64(z.Score)
			if s > cutoff {
				return out, nil
			}
			if s >= 1 {
				u, _ := z.Member.(string)
				out = append(out, Entrant{Seq: s, User: u})
			}
		}
		if len(zs) < page {
			return out, nil
		}
	}
}

// tickAgain runs one more Tick after the lottery's seed was revealed within
// a step (the tick script that recorded the cutoff could not place anyone)
// and adds it to res.
func (is *Ticker) tickAgain(ctx context.Context, room string, res TickResult) (TickResult, error) {
	more, err := is.Tick(ctx, room)
	more.Admitted += res.Admitted
	more.PriorityAdmitted += res.PriorityAdmitted
	more.Expired += res.Expired
	more.NotClaimed += res.NotClaimed
	more.Placed += res.Placed
	more.ClosedOut += res.ClosedOut
	return more, err
}

// statsLottery sets st.Lottery's Commitment (the SHA-1 of the committed
// secret) and Seed from the room view: the stats script sees only
// lottery_seed, which is LotteryPending until the reveal and then the
// draw's seed, not the committed secret.
func (is *core) statsLottery(ctx context.Context, room string, st *Stats) {
	if st.Lottery == nil {
		return
	}
	v, err := is.RoomLottery(ctx, room)
	if err != nil {
		return
	}
	st.Lottery.Commitment, st.Lottery.Seed = v.CommitmentSHA1, v.Seed
}

// commitmentRecords parses the config field lottery_commits (a JSON array
// of CommitmentRecord); nil when absent or unreadable.
func commitmentRecords(field string) []CommitmentRecord {
	if field == "" {
		return nil
	}
	var rs []CommitmentRecord
	if json.Unmarshal([]byte(field), &rs) != nil {
		return nil
	}
	for i := range rs {
		rs[i].At = time.UnixMilli(rs[i].AtMs)
	}
	return rs
}

// recordCommitment appends v's commitment to the room's public record
// (lottery_commits) unless it is already the last one for v's epoch: a
// commitment that changes — another key, a restore under a new epoch, a
// secret written by hand — becomes a new, visible entry rather than a
// silent replacement (RoomLottery.Commitments, Influence). Not atomic
// across replicas: two recording at once may record one of them twice.
func (is *core) recordCommitment(ctx context.Context, room string, v *RoomLottery, why string) {
	rs := slices.DeleteFunc(slices.Clone(v.Commitments), func(r CommitmentRecord) bool { return r.Why == "unrecorded" })
	if n := len(rs); n > 0 && rs[n-1].Commitment == v.Commitment && rs[n-1].Epoch == v.Epoch {
		return
	}
	now := is.now()
	rs = append(rs, CommitmentRecord{Commitment: v.Commitment, Epoch: v.Epoch, AtMs: now.UnixMilli(), Why: why})
	b, _ := json.Marshal(rs)
	if err := is.cfg.Redis.HSet(ctx, roomKeys(room)[0], "lottery_commits", string(b)).Err(); err != nil {
		is.log.Warn("record the lottery commitment", "room", room, "err", err)
	}
}
