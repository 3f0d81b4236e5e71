-- ban: ARGV[3] = user, ARGV[4] = duration (ms, > 0), ARGV[5] = reason ("" for
-- none). Removes the user's waiting entry (its token reads REVOKED), revokes
-- their live admission, and refuses their enters until now + duration
-- (ban_user). A repeated ban replaces the end and the reason.
-- Returns {'BANNED', banned_until_ms, removed (1: a waiting entry), revoked jti or '', now_ms}.
local cfg = load_config(false)
if not cfg then return { 'ERROR', 'unknown_room' } end
local now = now_ms(cfg)
local ends = now + tonumber(ARGV[4])
local removed, revoked = ban_user(cfg, ARGV[3], ends, ARGV[5], now)
journal_flush(cfg)
return { 'BANNED', ends, removed, revoked, now }
