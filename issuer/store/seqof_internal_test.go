package store

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
)

// seq_of (lua/prelude.lua) reads exactly the ids the whole-id pattern it
// replaced read (the oracle below): this epoch's "<epoch>.<seq>.<admno>.<ms>",
// nothing else; and it gives the seq's digits as the id has them. On
// redis-server and on the embedded store (miniredis: gopher-lua's patterns).
func TestSeqOfReadsThisEpochsIDsOnly(t *testing.T) {
	embedded := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { _ = embedded.Close() })
	for name, rdb := range map[string]*redis.Client{"redis-server": redistest.Start(t).Client(t), "miniredis": embedded} {
		t.Run(name, func(t *testing.T) { checkSeqOf(t, rdb) })
	}
}

func checkSeqOf(t *testing.T, rdb *redis.Client) {
	body := `local cfg = { epoch = ARGV[1] }
local function oracle(jti)
  local e, s = string.match(jti, '^([0-9a-z]+)%.(%d+)%.%d+%.%d+$')
  if e ~= cfg.epoch then return nil end
  return tonumber(s)
end
local out = {}
for i = 2, #ARGV do
  local seq, digits = seq_of(cfg, ARGV[i])
  local want = oracle(ARGV[i])
  out[#out + 1] = { seq or -1, digits or '', want or -1 }
end
return out`
	ids := []string{
		"mjx2k0q8a1.42.7.1795176000000", // this epoch's
		"mjx2k0q8a1.007.7.1795176000000",
		"mjx2k0q8a2.42.7.1795176000000", // another epoch's
		"xmjx2k0q8a1.42.7.1795176000000",
		"mjx2k0q8a1x.42.7.1795176000000",
		"jx2k0q8a1.42.7.1795176000000",
		"mjx2k0q8a1.42.7", "mjx2k0q8a1.42.7.1.1", "mjx2k0q8a1.42.7.1795176000000 ",
		"mjx2k0q8a1..7.1", "mjx2k0q8a1.4a.7.1", "mjx2k0q8a1.42.7.", "mjx2k0q8a1.", "mjx2k0q8a1", "",
	}
	args := append([]any{"mjx2k0q8a1"}, toAny(ids)...)
	r, err := redis.NewScript(assemble(prelude, body)).Run(context.Background(), rdb, roomKeys("r"), args...).Slice()
	require.NoError(t, err)
	require.Len(t, r, len(ids))
	for i, x := range r {
		v := x.([]any)
		require.Equal(t, v[2], v[0], "seq_of(%q) against the whole-id pattern", ids[i])
	}
	require.Equal(t, []any{int64(42), "42", int64(42)}, r[0])
	require.Equal(t, []any{int64(7), "007", int64(7)}, r[1])
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}
