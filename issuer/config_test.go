package issuer_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
)

func TestConfigValidate(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = client.Close(); _ = cluster.Close() })
	for name, c := range map[string]struct {
		cfg issuer.Config
		ok  bool
	}{
		"zero (every default)":      {issuer.Config{}, true},
		"enter batch 1":             {issuer.Config{EnterBatch: 1}, true},
		"enter batch max":           {issuer.Config{EnterBatch: issuer.MaxEnterBatch}, true},
		"enter batch negative":      {issuer.Config{EnterBatch: -1}, false},
		"enter batch over max":      {issuer.Config{EnterBatch: issuer.MaxEnterBatch + 1}, false},
		"script batch 1":            {issuer.Config{ScriptBatch: 1}, true},
		"script batch max":          {issuer.Config{ScriptBatch: issuer.MaxScriptBatch}, true},
		"script batch negative":     {issuer.Config{ScriptBatch: -1}, false},
		"script batch over max":     {issuer.Config{ScriptBatch: issuer.MaxScriptBatch + 1}, false},
		"secret 32 bytes":           {issuer.Config{WaitingSecret: make([]byte, 32)}, true},
		"secret short":              {issuer.Config{WaitingSecret: make([]byte, 31)}, false},
		"replicas, no client yet":   {issuer.Config{CompletionReplicas: 1}, true},
		"replicas on a client":      {issuer.Config{Redis: client, CompletionReplicas: 1}, true},
		"replicas on a cluster":     {issuer.Config{Redis: cluster, CompletionReplicas: 1}, false},
		"default room":              {issuer.Config{DefaultRoom: &issuer.RoomConfig{Capacity: 5}}, true},
		"default room out of range": {issuer.Config{DefaultRoom: &issuer.RoomConfig{SessionDuration: time.Hour}}, false},
	} {
		err := c.cfg.Validate()
		if c.ok {
			assert.NoError(t, err, name)
			continue
		}
		assert.ErrorIs(t, err, flashgate.ErrInvalidInput, name)
		// New refuses what Validate refuses.
		cfg := c.cfg
		if cfg.Redis == nil {
			cfg.Redis = client
		}
		_, err = issuer.New(cfg)
		assert.ErrorIs(t, err, flashgate.ErrInvalidInput, name)
	}
	_, err := issuer.New(issuer.Config{})
	assert.ErrorIs(t, err, flashgate.ErrInvalidInput, "New needs Redis")
}

func TestUpdateRoomMerges(t *testing.T) {
	ctx := context.Background()
	is := newIssuer(t, redistest.Start(t).Client(t), nil)
	room := redistest.Room("patch")
	ptr := func(n int) *int { return &n }
	dur := func(d time.Duration) *time.Duration { return &d }

	// An unknown room is created from the defaults with the patch applied.
	cfg, created, err := is.UpdateRoom(ctx, room, issuer.RoomPatch{Capacity: ptr(2)})
	require.NoError(t, err)
	assert.True(t, created)
	want := issuer.RoomConfig{Capacity: 2}.WithDefaults()
	assert.Equal(t, want, cfg)

	// Absent fields keep their values.
	cfg, created, err = is.UpdateRoom(ctx, room, issuer.RoomPatch{TickBatch: ptr(5), Tick: dur(500 * time.Millisecond)})
	require.NoError(t, err)
	assert.False(t, created)
	want.TickBatch, want.Tick = 5, 500*time.Millisecond
	assert.Equal(t, want, cfg)
	stored, err := is.Room(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, want, stored)

	// A window bound set, then removed with the zero time.
	opens := time.UnixMilli(time.Now().Add(time.Hour).UnixMilli())
	cfg, _, err = is.UpdateRoom(ctx, room, issuer.RoomPatch{Opens: &opens})
	require.NoError(t, err)
	assert.True(t, cfg.Opens.Equal(opens))
	cfg, _, err = is.UpdateRoom(ctx, room, issuer.RoomPatch{Opens: &time.Time{}})
	require.NoError(t, err)
	assert.True(t, cfg.Opens.IsZero())

	// Refusals leave the stored config alone.
	paused, empty := issuer.RoomPaused, issuer.RoomState("")
	closesBefore := opens.Add(-2 * time.Hour)
	for name, p := range map[string]issuer.RoomPatch{
		"zero capacity":        {Capacity: ptr(0)},
		"negative rate":        {RatePerMinute: ptr(-1)},
		"zero session":         {SessionDuration: dur(0)},
		"session over max":     {SessionDuration: dur(issuer.MaxSessionDuration + time.Second)},
		"fractional session":   {SessionDuration: dur(1500 * time.Millisecond)},
		"tick over a minute":   {Tick: dur(60001 * time.Millisecond)},
		"tick too short":       {Tick: dur(10 * time.Millisecond)},
		"zero batch":           {TickBatch: ptr(0)},
		"empty state":          {State: &empty},
		"closes before opens":  {State: &paused, Opens: &opens, Closes: &closesBefore},
		"state out of the set": {State: func() *issuer.RoomState { s := issuer.RoomState("melted"); return &s }()},
	} {
		_, _, err := is.UpdateRoom(ctx, room, p)
		assert.ErrorIs(t, err, flashgate.ErrInvalidInput, name)
	}
	stored, err = is.Room(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, want, stored)

	_, _, err = is.UpdateRoom(ctx, "bad room", issuer.RoomPatch{})
	assert.ErrorIs(t, err, flashgate.ErrInvalidInput)
}
