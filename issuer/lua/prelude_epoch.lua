-- new_epoch returns a fresh epoch: Redis TIME in microseconds, base36 (10 characters until
-- 2059). A room recreated after a data loss is recreated later, so its epoch differs.
local B36 = '0123456789abcdefghijklmnopqrstuvwxyz'
local function new_epoch()
  local t = redis.call('TIME')
  local n = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local s = ''
  repeat
    local d = n % 36
    s = string.sub(B36, d + 1, d + 1) .. s
    n = (n - d) / 36
  until n == 0
  return s
end

-- The pre-queue lottery (docs/rooms.md#pre-queue-lottery). In a room with prequeue 'shuffle', everyone
-- who entered before the room first opened is placed in a uniformly random order, once:
--   * draw_lottery (from load_config, in the first script of any kind that finds the room open in
--     effect) records lottery_cutoff = the arrival counter at that moment (seq <= cutoff: entered
--     before opening; enter runs it before it assigns a seq, so no later arrival is ever drawn),
--     lottery_bits (bits of the cutoff) and lottery_ms. From then on the order is fixed by
--     (lottery_seed, epoch, cutoff): nothing that happens later can change it.
--   * the tick then rescores the pre-queue entries still at their seq (scores 1 … cutoff) with
--     lottery_score, at most its bound per call (no call walks the whole line), and records
--     lottery_done_ms when none is left. Until then nobody is admitted, and a pre-queue entry's
--     place is not shown (position 0 in the enter and status replies: in_prequeue).
-- lottery_score(seed, epoch, bits, seq) = -2^53 + h * 2^bits + seq, where h is the top 53 - bits bits
-- of the first 52 bits of SHA-1(seed .. ':' .. epoch .. ':' .. seq): negative, so every drawn entry is ahead of every
-- later arrival (scores >= 1); exact in a double (|score| <= 2^53); the seq is its low bits
-- (seq_of_score), and equal h (probability 2^-(53 - bits) a pair) fall back to arrival order.
-- The seed (128 bits from crypto/rand, written by issuer.SetRoom or with the create policy) stays
-- secret until the cutoff is recorded, and is shown after it (issuer.Stats), so anyone can
-- recompute the order (issuer.LotteryScore).
local TWO53 = 9007199254740992

local function lottery_score(seed, epoch, bits, seq)
  local h = tonumber(string.sub(redis.sha1hex(seed .. ':' .. epoch .. ':' .. num(seq)), 1, 13), 16) -- 52 bits
  h = math.floor(h / 2 ^ (bits - 1)) -- the top 53 - bits of them
  return -TWO53 + h * 2 ^ bits + seq
end

-- seq_of_score returns the arrival seq of an entry from its score in waiting (a seq, or a lottery
-- score). Every script that reads a waiting score as a seq goes through it.
local function seq_of_score(cfg, score)
  local x = tonumber(score)
  if x >= 0 then return x end
  return (x + TWO53) % (2 ^ cfg.bits)
end

-- in_prequeue: is the waiting entry seq in the pre-queue, its place not drawn yet? True in a shuffle
-- room before it opens (every entry), and for seq <= cutoff until the rescoring is done.
local function in_prequeue(cfg, seq)
  if cfg.cutoff then return not cfg.drawn_done and seq <= cfg.cutoff end
  return cfg.prequeue == 'shuffle'
end

local journal_config -- load_config calls it; defined below
local draw_lottery -- load_config calls it; defined below, after keep_clock (which it uses)

