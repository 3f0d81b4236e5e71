package issuer

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate"
)

// SyncSecret keeps this replica's waiting-token secret in step with the
// shared one in Redis (fg:waiting-secret, LoadOrCreateSecret): a missing key
// (lost with Redis's data) is set back to this replica's secret (SETNX: the
// first replica to get there wins), and a key that differs is adopted as the
// current secret. Secrets held before stay valid for verifying tokens (at
// most 4 in all), so replicas converge on one secret without refusing tokens
// they minted. Run calls it every SecretSyncEvery (500 ms) when
// Config.SharedSecret is set.
// Errors: flashgate.ErrInternal (no secret, or a corrupt stored one), flashgate.ErrUnavailable.
func (is *Ticker) SyncSecret(ctx context.Context) error {
	set := is.secrets.Load()
	if set == nil {
		return flashgate.Errorf(flashgate.CodeInternal, "issuer: Config.WaitingSecret is not set")
	}
	stored, err := is.cfg.Redis.Get(ctx, keySecret).Result()
	if errors.Is(err, redis.Nil) {
		mine := base64.StdEncoding.EncodeToString(set.current.secret)
		if err := is.cfg.Redis.SetNX(ctx, keySecret, mine, 0).Err(); err != nil {
			return unavailable(err)
		}
		if stored, err = is.cfg.Redis.Get(ctx, keySecret).Result(); err == nil && stored == mine {
			is.log.Warn("waiting-token secret was missing from Redis (data loss?): stored this replica's",
				"key", keySecret, "sid", set.current.sid)
		}
	}
	if err != nil {
		return unavailable(err)
	}
	secret, err := decodeSecret(stored)
	if err != nil {
		return err
	}
	if sid := secretID(secret); sid != set.current.sid {
		is.secrets.Store(set.adopt(secret))
		is.log.Warn("adopted the shared waiting-token secret from Redis; tokens of the previous one still verify",
			"key", keySecret, "sid", sid, "previous_sid", set.current.sid)
	}
	return nil
}

// decodeSecret decodes a stored waiting secret (standard base64, ≥ 32 bytes).
func decodeSecret(s string) ([]byte, error) {
	secret, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(secret) < 32 {
		return nil, flashgate.Errorf(flashgate.CodeInternal, "stored waiting secret %s is corrupt", keySecret)
	}
	return secret, nil
}

// LoadOrCreateSecret returns the waiting-token secret shared through Redis
// (key fg:waiting-secret), creating a random 32-byte one with SETNX if none
// exists, so every replica agrees without configuration. Pass it as
// Config.WaitingSecret with Config.SharedSecret set, so that Run keeps the
// replicas agreeing after Redis loses the key (SyncSecret).
//
// When the key is missing it first waits SecretGrace (1 s, two SyncSecret
// periods) and looks again: after a Redis data loss, replicas still running
// put their secret back within that time, and a replica starting then adopts
// it instead of inventing a second one (whose tokens the others would not
// know for up to a sync period). Only a first deployment pays the wait.
// Errors: flashgate.ErrUnavailable, flashgate.ErrInternal (a corrupt stored secret), ctx's.
func LoadOrCreateSecret(ctx context.Context, rdb Redis) ([]byte, error) {
	s, err := rdb.Get(ctx, keySecret).Result()
	if errors.Is(err, redis.Nil) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(SecretGrace):
		}
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		if err := rdb.SetNX(ctx, keySecret, base64.StdEncoding.EncodeToString(b[:]), 0).Err(); err != nil {
			return nil, unavailable(err)
		}
		s, err = rdb.Get(ctx, keySecret).Result()
	}
	if err != nil {
		return nil, unavailable(err)
	}
	return decodeSecret(s)
}

// SecretSyncEvery is how often Run calls SyncSecret (Config.SharedSecret),
// and SecretGrace how long LoadOrCreateSecret waits for a running replica
// to restore a lost shared secret before it creates one.
const (
	SecretSyncEvery = 500 * time.Millisecond
	SecretGrace     = 2 * SecretSyncEvery
)
