-- audit: ARGV[3] = actor, ARGV[4] = action, ARGV[5] = detail (a JSON object, '' for {}).
-- Appends an admin action to the room's journal (prelude journal_config's layout, kind
-- 'audit': kind epoch at actor action detail), with the room's epoch and clock. Writes
-- nothing for an unknown room (no key is created) or one whose journal is off.
-- Returns {1} if journaled, else {0}.
local cfg = load_config(false)
if not cfg or cfg.journal <= 0 then return { 0 } end
local detail = ARGV[5]
if detail == '' then detail = '{}' end
redis.call('XADD', K_JOURNAL, 'MAXLEN', '~', cfg.journal, '*', 'kind', 'audit', 'epoch', cfg.epoch,
  'at', num(now_ms(cfg)), 'actor', ARGV[3], 'action', ARGV[4], 'detail', detail)
return { 1 }
