package server

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashgate/flashgate/issuer"
)

// RoomView is the public room view (GET /v1/rooms/{room}): what anyone may
// know of a room's pre-queue lottery, to check join receipts with (docs/rooms.md
// "Pre-queue lottery"; issuer.RoomLottery).
type RoomView struct {
	Room     string `json:"room"`
	Epoch    string `json:"epoch,omitempty"`
	PreQueue string `json:"pre_queue"`
	// PreQueueDeprecated is PreQueue under its old name, emitted for one
	// release (CHANGELOG.md#deprecated) and read when pre_queue is absent
	// (a view from an older server).
	PreQueueDeprecated string `json:"prequeue"`
	// Lottery is absent for a room with no lottery seed (fifo).
	Lottery *PublicLottery `json:"lottery,omitempty"`
}

// PublicLottery is a room's lottery as the public room view shows it: the
// commitment from the moment the seed exists; seed, cutoff and bits once
// drawn.
type PublicLottery struct {
	// Commitment is SHA-256 hex of "flashgate lottery commitment v1" NUL
	// room NUL epoch NUL seed (issuer.LotteryCommitment).
	Commitment string `json:"commitment"`
	// CommitmentSHA1 is the SHA-1 hex of the seed alone: deprecated, shown
	// for one release (the admin stats' lottery.commitment).
	CommitmentSHA1 string `json:"commitment_sha1"`
	Drawn          bool   `json:"drawn"`
	Seed           string `json:"seed,omitempty"`
	Cutoff         *int64 `json:"cutoff,omitempty"`
	Bits           int    `json:"bits,omitempty"`
	DrawnAtMs      int64  `json:"drawn_at_ms,omitempty"`
	PlacedAtMs     int64  `json:"placed_at_ms,omitempty"`
	// Randomness names where the draw's randomness comes from:
	// "drand:<chain hash>" or "operator-chosen seed" (issuer.RoomLottery.RandomnessName).
	Randomness string `json:"randomness"`
	// Beacon is the drand chain (public info) and BeaconRound the round
	// the draw uses, from the configuration on; BeaconSignature the
	// round's signature once the seed is revealed.
	Beacon          *issuer.BeaconChain `json:"beacon,omitempty"`
	BeaconRound     uint64              `json:"beacon_round,omitempty"`
	BeaconSignature string              `json:"beacon_signature,omitempty"`
	// Entrants is the pre-queue's entrant digest (issuer.EntrantDigest),
	// EntrantCount its entries, FixedAtMs when it was fixed.
	Entrants     string `json:"entrants,omitempty"`
	EntrantCount int64  `json:"entrant_count,omitempty"`
	FixedAtMs    int64  `json:"fixed_at_ms,omitempty"`
	// Secret is the committed secret once revealed (Seed is then the
	// draw's seed, issuer.LotterySeed).
	Secret string `json:"secret,omitempty"`
	// Influence says which places whoever runs the issuer could have
	// steered ("" none; issuer.RoomLottery.Influence).
	Influence string `json:"influence,omitempty"`
	// Commitments is every commitment the room showed, with when (at_ms)
	// and why ("configured", "restored", "at the draw", "unrecorded").
	Commitments []issuer.CommitmentRecord `json:"commitments,omitempty"`
}

// RoomLottery is the issuer's form of v, for issuer.VerifyReceipt: what a
// checker reads from GET /v1/rooms/{room} (`flashgate lottery verify`).
func (v RoomView) RoomLottery() issuer.RoomLottery {
	pq := v.PreQueue
	if pq == "" {
		pq = v.PreQueueDeprecated
	}
	out := issuer.RoomLottery{Room: v.Room, Epoch: v.Epoch, PreQueue: issuer.PreQueue(pq)}
	if l := v.Lottery; l != nil {
		out.Commitment, out.CommitmentSHA1, out.Drawn, out.Seed = l.Commitment, l.CommitmentSHA1, l.Drawn, l.Seed
		if l.Cutoff != nil {
			out.Cutoff = *l.Cutoff
		}
		out.Bits = l.Bits
		out.Source = issuer.OperatorChosen
		if l.Randomness != issuer.OperatorChosen && l.Randomness != "" {
			out.Source = "drand"
		}
		out.Beacon, out.BeaconRound, out.BeaconSignature = l.Beacon, l.BeaconRound, l.BeaconSignature
		out.Entrants, out.EntrantCount, out.Secret, out.Commitments = l.Entrants, l.EntrantCount, l.Secret, l.Commitments
		if l.FixedAtMs > 0 {
			out.FixedAt = time.UnixMilli(l.FixedAtMs)
		}
	}
	return out
}

// roomViewJSON is v's JSON form.
func roomViewJSON(v *issuer.RoomLottery) RoomView {
	out := RoomView{Room: v.Room, Epoch: v.Epoch, PreQueue: string(v.PreQueue), PreQueueDeprecated: string(v.PreQueue)}
	if v.Commitment == "" && !v.Drawn {
		return out
	}
	l := &PublicLottery{Commitment: v.Commitment, CommitmentSHA1: v.CommitmentSHA1, Drawn: v.Drawn,
		Randomness: v.RandomnessName(), Beacon: v.Beacon, BeaconRound: v.BeaconRound, BeaconSignature: v.BeaconSignature,
		Entrants: v.Entrants, EntrantCount: v.EntrantCount, FixedAtMs: unixMs(v.FixedAt), Secret: v.Secret, Influence: v.Influence(), Commitments: v.Commitments}
	if v.Drawn {
		cutoff := v.Cutoff
		l.Seed, l.Cutoff, l.Bits = v.Seed, &cutoff, v.Bits
		l.DrawnAtMs, l.PlacedAtMs = unixMs(v.DrawnAt), unixMs(v.PlacedAt)
	}
	out.Lottery = l
	return out
}

// GET /v1/rooms/:room: the public room view.
func (s *Server) roomView(c *fiber.Ctx) error {
	v, err := s.is.RoomLottery(c.UserContext(), param(c, "room"))
	if err != nil {
		return err
	}
	return c.JSON(roomViewJSON(v))
}
