package issuer

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/redis/go-redis/v9"
)

// SetRoom creates or replaces room's configuration (zero fields take their
// defaults) and registers the room with the tick loop. Changes apply to the
// next script run on every replica. Errors: flashgate.ErrInvalidInput, flashgate.ErrUnavailable.
func (is *Issuer) SetRoom(ctx context.Context, room string, c RoomConfig) (RoomConfig, error) {
	if err := checkRoom(room); err != nil {
		return RoomConfig{}, err
	}
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		return RoomConfig{}, err
	}
	err := is.cfg.Redis.HSet(ctx, roomKeys(room)[0],
		"state", string(c.State), "capacity", c.Capacity, "rate", c.RatePerMinute,
		"session_ms", c.SessionDuration.Milliseconds(), "batch", c.TickBatch, "tick_ms", c.Tick.Milliseconds(),
		"opens_ms", windowMs(c.Opens), "closes_ms", windowMs(c.Closes)).Err()
	if err == nil {
		err = is.cfg.Redis.SAdd(ctx, keyRooms, room).Err()
	}
	if err != nil {
		return RoomConfig{}, unavailable(err)
	}
	is.remember(room, c)
	return c, nil
}

// Room returns room's configuration. Errors: flashgate.ErrInvalidInput,
// flashgate.ErrUnknownRoom, flashgate.ErrUnavailable.
func (is *Issuer) Room(ctx context.Context, room string) (RoomConfig, error) {
	if err := checkRoom(room); err != nil {
		return RoomConfig{}, err
	}
	m, err := is.cfg.Redis.HGetAll(ctx, roomKeys(room)[0]).Result()
	if err != nil {
		return RoomConfig{}, unavailable(err)
	}
	if len(m) == 0 {
		return RoomConfig{}, flashgate.Errorf(flashgate.CodeUnknownRoom, "unknown waiting room %q", room)
	}
	atoi := func(k string) int { n, _ := strconv.Atoi(m[k]); return n }
	c := RoomConfig{
		Capacity: atoi("capacity"), RatePerMinute: atoi("rate"),
		SessionDuration: time.Duration(atoi("session_ms")) * time.Millisecond,
		Tick:            time.Duration(atoi("tick_ms")) * time.Millisecond,
		TickBatch:       atoi("batch"), State: RoomState(m["state"]),
		Opens: windowTime(int64(atoi("opens_ms"))), Closes: windowTime(int64(atoi("closes_ms"))),
	}
	is.remember(room, c)
	return c, nil
}

// SetState opens, pauses or closes an existing room.
func (is *Issuer) SetState(ctx context.Context, room string, s RoomState) (RoomConfig, error) {
	c, err := is.Room(ctx, room)
	if err != nil {
		return RoomConfig{}, err
	}
	c.State = s
	return is.SetRoom(ctx, room, c)
}

// Rooms lists the registered rooms, sorted.
func (is *Issuer) Rooms(ctx context.Context) ([]string, error) {
	rooms, err := is.cfg.Redis.SMembers(ctx, keyRooms).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable(err)
	}
	slices.Sort(rooms)
	return rooms, nil
}

// Stats is a consistent snapshot of one room. Its JSON form is the
// server's (server.Stats, GET /admin/rooms/{room}/stats).
type Stats struct {
	Room   string
	Config RoomConfig // as configured
	// State is the state in effect at At: Config.State with the event window
	// applied (paused before Opens, closed from Closes).
	State   RoomState
	Waiting int64
	Active  int64
	// Entered counts entries ever created in the room (the arrival counter):
	// refreshes and repeated enters do not count.
	Entered   int64
	Admitted  int64
	FastTrack int64
	Expired   int64
	Completed int64
	Revoked   int64
	Left      int64
	Zombies   int64
	// PeakActive is the highest number of live admissions seen right after an admission.
	PeakActive int64
	// Epoch is the room's epoch: created with the room, new whenever the room
	// is recreated after Redis lost its data (invariant 6, README "Invariants").
	Epoch string
	At    time.Time
}

// Stats returns room's counters. Errors: flashgate.ErrInvalidInput, flashgate.ErrUnknownRoom, flashgate.ErrUnavailable.
func (is *Issuer) Stats(ctx context.Context, room string) (*Stats, error) {
	if err := checkRoom(room); err != nil {
		return nil, err
	}
	r, err := is.run(ctx, statsScript, room)
	if err != nil {
		return nil, err
	}
	st := decodeStats(room, r)
	is.remember(room, st.Config)
	return st, nil
}

// Run ticks every registered room at its configured tick until ctx ends,
// then returns ctx.Err(). Run it in every replica: the limits live in Redis,
// so correctness does not depend on how many run. Errors of one tick are
// logged (rate-limited) and retried at the next; the queue store's outages
// and refusals (flashgate.ErrUnavailable, flashgate.ErrStoreFull) only when they start and end.
//
// Run also recovers from a Redis data loss (recovery.go): it ticks every room
// this replica knows even when fg:rooms no longer lists it, so a lost room is
// restored from its last known config at its next tick; and, with
// Config.SharedSecret, it keeps the waiting-token secret in step with Redis
// (SyncSecret every SecretSyncEvery).
func (is *Issuer) Run(ctx context.Context) error {
	const roomsEvery = 2 * time.Second
	next := map[string]time.Time{}
	var rooms []string
	var roomsAt, secretAt time.Time
	var lastErrLog, storeFailing time.Time
	logErr := func(msg string, err error, attrs ...any) {
		if c := flashgate.ErrorCode(err); c == flashgate.CodeUnavailable || c == flashgate.CodeStoreFull {
			if storeFailing.IsZero() {
				storeFailing = time.Now()
				is.log.Warn(msg+" (queue store; logged again when ticks succeed)", append(attrs, slog.Any("err", err))...)
			}
			return
		}
		if time.Since(lastErrLog) > 5*time.Second {
			lastErrLog = time.Now()
			is.log.Warn(msg, append(attrs, slog.Any("err", err))...)
		}
	}
	storeOK := func() {
		if !storeFailing.IsZero() {
			is.log.Info("tick loop: ticking again", "failed_for", time.Since(storeFailing).Round(time.Millisecond).String())
			storeFailing = time.Time{}
		}
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		now := time.Now()
		if now.Sub(roomsAt) >= roomsEvery {
			r, err := is.Rooms(ctx)
			if err != nil {
				logErr("tick loop: list rooms", err)
			} else {
				rooms, roomsAt = is.withKnown(r), now
				if len(rooms) == 0 {
					storeOK() // otherwise a successful tick says so
				}
			}
		}
		if is.cfg.SharedSecret && now.Sub(secretAt) >= SecretSyncEvery {
			secretAt = now
			if err := is.SyncSecret(ctx); err != nil {
				logErr("tick loop: sync waiting secret", err)
			}
		}
		for _, room := range rooms {
			if now.Before(next[room]) {
				continue
			}
			res, err := is.Tick(ctx, room)
			if err != nil {
				if errors.Is(err, flashgate.ErrUnknownRoom) {
					next[room] = now.Add(roomsEvery)
					continue
				}
				logErr("tick failed", err, "room", room)
				next[room] = now.Add(time.Second)
				continue
			}
			storeOK()
			// ±10 % jitter keeps replicas from ticking in lock-step.
			next[room] = now.Add(time.Duration(float64(res.Tick) * (0.9 + 0.2*rand.Float64())))
		}
	}
}
