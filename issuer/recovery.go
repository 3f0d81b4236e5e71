package issuer

import (
	"context"
	"slices"
	"strconv"
	"strings"
)

// Recovery after a Redis data loss (a restart without persistence, a
// failover to an empty replica, FLUSHALL). What was in Redis is gone; what
// each replica keeps in memory is used to come back without operator action:
//
//   - Epochs (lua/prelude.lua): a room recreated after the loss gets a new
//     epoch, and every id minted before it — waiting tokens, admission ids —
//     is refused as "from an earlier epoch" (NOT_FOUND), never read as the
//     entry or admission that now has the same arrival number (invariant 6).
//   - Room configs: each replica remembers the last config it saw of every
//     room (SetRoom, Room, Stats and every tick report it). A lost room is
//     recreated from it — by the next tick of any replica that knew it, or by
//     the next enter — instead of answering 404 unknown_room or falling back
//     to the default policy. Each restore is logged (WARN) and counted
//     (Observation.RoomsRestored, the metric flashgate_rooms_restored_total). The
//     page's branding (RoomConfig.PageTitle, PageMessage, BrandColor) is
//     not part of the scripts' policy: the replica that restored the room
//     puts it back right after (restorePage), if it knew it (SetRoom, Room).
//   - The waiting-token secret (Config.SharedSecret): SyncSecret puts a lost
//     fg:waiting-secret back and adopts the one in Redis when it differs, so
//     every replica converges on one secret (and LoadOrCreateSecret gives
//     running replicas SecretGrace to put it back before inventing one);
//     tokens keyed by a secret a replica never held read NOT_FOUND
//     (waiting.go), not flashgate.ErrOwnerMismatch.

// knownRoom is a replica's last known config of a room and its policy string.
type knownRoom struct {
	cfg    RoomConfig
	policy string
}

// remember records c as room's last known config, its branding included
// (c is a whole config: SetRoom's, or Room's read of the hash).
func (is *core) remember(room string, c RoomConfig) {
	if v, ok := is.known.Load(room); ok && v.(*knownRoom).cfg.equal(c) {
		return
	}
	// The key outlives the call: a copy (invariant 7).
	is.known.Store(strings.Clone(room), &knownRoom{cfg: c, policy: c.policy("-")})
}

// rememberPolicy records c, a config the scripts reported (no branding), as
// room's last known config, keeping the branding known before.
func (is *core) rememberPolicy(room string, c RoomConfig) {
	if v, ok := is.known.Load(room); ok {
		k := v.(*knownRoom).cfg
		kf, cf := k.pageFields(), c.pageFields()
		for i := range kf {
			setPageValue(cf[i][1], pageValue(kf[i][1]))
		}
	}
	is.remember(room, c)
}

// equal compares configs by value (time.Time by instant).
func (c RoomConfig) equal(d RoomConfig) bool {
	return c.Capacity == d.Capacity && c.RatePerMinute == d.RatePerMinute && c.SessionDuration == d.SessionDuration &&
		c.Tick == d.Tick && c.TickBatch == d.TickBatch && c.State == d.State && c.ArrivalWindow == d.ArrivalWindow &&
		c.preQueue() == d.preQueue() &&
		c.Opens.Equal(d.Opens) && c.Closes.Equal(d.Closes) && c.Retention == d.Retention && c.Auto == d.Auto &&
		c.CloseReason == d.CloseReason && c.EndedAt.Equal(d.EndedAt) && c.DeletedAt.Equal(d.DeletedAt) &&
		c.samePage(d)
}

// restorePage writes c's page branding into room's config hash after a
// script created the room (a restore, or a new room from DefaultRoom): the
// scripts' policy does not carry it. HSETNX, field by field: an admin's
// SetRoom in between (which writes every field, "" included) wins.
func (is *core) restorePage(ctx context.Context, room string, c RoomConfig) error {
	var args []string
	for _, f := range c.pageFields() {
		if v := pageValue(f[1]); v != "" {
			args = append(args, f[0].(string), v)
		}
	}
	if len(args) == 0 {
		return nil
	}
	return is.db.Branding(ctx, room, args...)
}

// knows reports whether this replica has seen room's config.
func (is *core) knows(room string) bool {
	_, ok := is.known.Load(room)
	return ok
}

// knowsLive reports whether this replica has seen room's config and the
// room had not ended then (an ended room's keys expire by design).
func (is *core) knowsLive(room string) bool {
	v, ok := is.known.Load(room)
	if !ok {
		return false
	}
	k := v.(*knownRoom)
	return k.cfg.EndedAt.IsZero() && k.cfg.DeletedAt.IsZero()
}

// createArg is a script's create-room argument for room (lua/prelude.lua
// ARGV[2]). Only enter (and its invite form, invite.lua) and tick may create a missing room (load_config(true)):
// both get the room's last known config, unless the room had ended (its keys
// expire by design: an ended room is never restored); failing that, enter
// gets the default policy (a new room) when auto rooms are not limited, and
// tick "" (a tick only restores, so every room it creates is a restore,
// logged as one). With limited auto rooms enter gets "" too: enterUsers
// reserves the room's slot on unknown_room and only then passes the default
// policy (defaultPolicy). Every other script gets "", which keeps the lookup
// and the bytes off the status and completion paths.
// A shuffle room's policy carries a fresh lottery seed on every call (the
// scripts store it only when they create the room), so no two rooms share
// one: a seed shown after one room's draw predicts no other room's.
func (is *core) createArg(by creator, room string) string {
	p := is.createPolicy(by, room)
	if p == "" {
		return ""
	}
	return p + "," + strconv.FormatInt(is.journalMaxLen(), 10)
}

// creator names the scripts that may create a missing room: the enter
// script (and its invite form), and the tick (which only restores).
type creator int

const (
	createsByEnter creator = iota
	createsByTick
)

// createPolicy is createArg without the journal bound: the policy string.
func (is *core) createPolicy(by creator, room string) string {
	if v, ok := is.known.Load(room); ok {
		k := v.(*knownRoom)
		if !k.cfg.EndedAt.IsZero() || !k.cfg.DeletedAt.IsZero() || is.cfg.LostRooms == LostRoomsAwaitRestore {
			return "" // ended: never restored; awaiting a restore: not recreated empty (lostRoom)
		}
		if k.cfg.PreQueue == PreQueueShuffle {
			return k.cfg.policy(newLotterySeed())
		}
		return k.policy
	}
	if by == createsByTick || is.cfg.DefaultRoom == nil || is.autoLimited() {
		return ""
	}
	return is.defaultPolicy()
}

// defaultPolicy is the create-room argument of a new auto room (DefaultRoom,
// marked auto): a shuffle room's with a fresh lottery seed.
func (is *core) defaultPolicy() string {
	if is.cfg.DefaultRoom.PreQueue == PreQueueShuffle {
		d := is.cfg.DefaultRoom.WithDefaults()
		d.Auto = true
		return d.policy(newLotterySeed())
	}
	return is.policy
}

// forget drops what this replica knows of room (its keys are gone after its
// end: it is no longer ticked, nor restored).
func (is *Ticker) forget(room string) {
	is.known.Delete(room)
	is.registered.Delete(room)
	is.idle.Delete(room)
	is.snaps.forget(room)
}

// noteCreated is called when an enter created room: from its last known
// config (a restore after a data loss), or from the default policy (a new
// auto room, also one reusing the name of an ended one).
func (is *Queue) noteCreated(ctx context.Context, room string) error {
	v, ok := is.known.Load(room)
	if ok && (!v.(*knownRoom).cfg.EndedAt.IsZero() || !v.(*knownRoom).cfg.DeletedAt.IsZero()) {
		// A room this replica knew as ended (freed, or its keys expired): a
		// new room of the same name, never a restore.
		is.snaps.forget(room)
		ok = false
	}
	if !ok {
		if is.cfg.DefaultRoom != nil {
			c := is.cfg.DefaultRoom.WithDefaults()
			c.Auto = true
			is.remember(room, c)
			return is.restorePage(ctx, room, c)
		}
		return nil
	}
	c := v.(*knownRoom).cfg
	is.restoredRoom(room, c, "enter")
	return is.restorePage(ctx, room, c)
}

func (is *core) restoredRoom(room string, c RoomConfig, by string) {
	is.restored.Add(1)
	is.snaps.forget(room)
	is.log.Warn("waiting room restored from its last known config: its data was lost from Redis, "+
		"so it starts a new epoch and every earlier waiting token and admission reads NOT_FOUND",
		"room", room, "by", by, "state", string(c.State), "capacity", c.Capacity,
		"rate_per_minute", c.RatePerMinute, "session", c.SessionDuration.String())
}

// noteTick reads what a tick call reports of the room: it remembers the
// config and, when the tick restored the room, logs and counts it and
// registers the room with the tick loops again (fg:rooms was lost with the
// rest).
func (is *Ticker) noteTick(ctx context.Context, room string, cfg RoomConfig, created bool) error {
	is.rememberPolicy(room, cfg)
	if !created {
		return nil
	}
	v, _ := is.known.Load(room)
	c := v.(*knownRoom).cfg
	is.restoredRoom(room, c, "tick")
	if err := is.restorePage(ctx, room, c); err != nil {
		return err
	}
	if err := is.cfg.Redis.SAdd(ctx, keyRooms, room).Err(); err != nil {
		return unavailable(err)
	}
	return nil
}

// withKnown returns rooms (from fg:rooms) with every room this replica
// knows added, sorted: a room lost from Redis is still ticked, which
// restores it.
func (is *Ticker) withKnown(rooms []string) []string {
	is.known.Range(func(k, _ any) bool {
		if r := k.(string); !slices.Contains(rooms, r) {
			rooms = append(rooms, r)
		}
		return true
	})
	slices.Sort(rooms)
	return rooms
}

// Knows reports whether this replica has seen room's config (cheap, no
// Redis): a room it does not know may still exist (Room asks Redis).
func (is *Queue) Knows(room string) bool { return is.knows(room) }
