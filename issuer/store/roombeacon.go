package store

import (
	"context"
	"strconv"
)

// roomBeaconScript is lua/roombeacon.lua (ScriptName "roombeacon").
var roomBeaconScript = load("roombeacon")

// RoomBeacon is lua/roombeacon.lua's reply: the room's state in effect,
// its lines (the public line's length, the priority lane's), the head and
// tail arrival numbers of the public line after the pre-queue (0: none),
// ExactThrough and Before as Snapshot has them, the close fields, the
// opening time (ms, 0: none), the page message, the rate and tick, and the
// bucket boundaries with their cumulative counts.
type RoomBeacon struct {
	State                         string
	Waiting, Priority, Head, Tail int64
	ExactThrough, Before          int64
	ClosedSeq                     int64
	CloseReason                   string
	EndedMs, OpensMs              int64
	PageMessage                   string
	Rate, TickMs                  int64
	// Buckets are {Through, Waiting} pairs, Through increasing, the last
	// one the tail: Waiting public entries wait with an arrival number in
	// (ExactThrough, Through].
	Buckets []BeaconBucket
}

// BeaconBucket is one boundary of a room beacon: Waiting entries of the
// public line wait with an arrival number in (ExactThrough, Through].
type BeaconBucket struct{ Through, Waiting int64 }

// RoomBeacon runs lua/roombeacon.lua with at most buckets boundaries.
// KEYS: the room's; ARGV: now, "", buckets.
func (g *Gateway) RoomBeacon(ctx context.Context, room string, buckets int) (RoomBeacon, error) {
	r, err := g.run(ctx, roomBeaconScript, room, roomKeysOf{room}.keys(), "", strconv.Itoa(buckets))
	if err != nil {
		return RoomBeacon{}, err
	}
	return decodeRoomBeacon(r)
}

func decodeRoomBeacon(r []any) (RoomBeacon, error) {
	c := newReader("roombeacon", r)
	v := RoomBeacon{State: c.str("room_state"), Waiting: c.int("waiting"), Priority: c.int("priority"),
		Head: c.int("head_seq"), Tail: c.int("tail_seq"), ExactThrough: c.int("exact_through"), Before: c.int("before"),
		ClosedSeq: c.int("closed_seq"), CloseReason: c.str("close_reason"), EndedMs: c.int("ended_ms"),
		OpensMs: c.int("opens_ms"), PageMessage: c.str("page_message"), Rate: c.int("rate"), TickMs: c.int("tick_ms")}
	for b := c.list("buckets"); b.more(); {
		v.Buckets = append(v.Buckets, BeaconBucket{Through: b.int("through"), Waiting: b.int("waiting")})
	}
	if c.Err() != nil {
		return RoomBeacon{}, c.Err()
	}
	return v, nil
}
