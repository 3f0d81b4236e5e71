-- drain: ARGV[3] = the most waiting entries this call removes (issuer.DrainPerCall; both lanes
-- together, the priority lane first),
-- ARGV[4] = the issuer's default retention (ms).
-- Frees the memory of a line that closing ended, in bounded steps: status
-- already answers those entries CLOSED from the room's state (closed_line),
-- so removing them changes no answer. No record is written per entry (the
-- closed_seq covers them all) and waiting users have no user index entry; nor is anything
-- journaled per entry: the journal's 'end' config event carries the same closed_seq and
-- close_reason (journal/doc.go: entries up to it that were never admitted ended closed).
--   * closed in effect: every waiting entry belongs to the closed line
--     (enters are refused while closed): the first ARGV[3] by rank go
--     (ZREMRANGEBYRANK, O(log N + ARGV[3]));
--   * reopened after an end: the entries of the closed line (seq <= closed_seq)
--     at the head of the line go, up to ARGV[3]; the tick never admits one
--     that is left behind a newer entry.
-- Returns {removed, still to drain (0 when done)}.
local cfg = load_config(false)
if not cfg then return { 'ERROR', 'unknown_room' } end
local now = now_ms(cfg)
local bound = tonumber(ARGV[3])
local removed, left = 0, 0
if cfg.state == 'closed' then
  -- the priority lane first, then the public line, ARGV[3] in all
  removed = redis.call('ZREMRANGEBYRANK', K_PRIORITY, 0, bound - 1)
  if removed < bound then removed = removed + redis.call('ZREMRANGEBYRANK', K_WAITING, 0, bound - removed - 1) end
  left = redis.call('ZCARD', K_WAITING) + redis.call('ZCARD', K_PRIORITY)
elseif cfg.closed_seq > 0 then
  -- the priority lane's scores are seqs: its closed-line entries are those scored up to closed_seq
  local pn = math.min(bound, redis.call('ZCOUNT', K_PRIORITY, '-inf', num(cfg.closed_seq)))
  if pn > 0 then removed = redis.call('ZREMRANGEBYRANK', K_PRIORITY, 0, pn - 1) end
  local head = {}
  if pn < bound then head = redis.call('ZRANGE', K_WAITING, 0, bound - pn - 1, 'WITHSCORES') end
  local n = 0
  for i = 2, #head, 2 do
    if seq_of_score(cfg, head[i]) > cfg.closed_seq then break end
    n = n + 1
  end
  if n > 0 then removed = removed + redis.call('ZREMRANGEBYRANK', K_WAITING, 0, n - 1) end
  if pn + n == bound then left = 1 end -- maybe more: call again
end
if removed > 0 then
  redis.call('HINCRBY', K_STATS, 'closed_out', removed)
end
if cfg.state == 'closed' and cfg.ended == 0 then note_end(cfg, now, nil, ARGV[4]) end
return { removed, left }
