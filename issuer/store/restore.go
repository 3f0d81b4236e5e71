package store

import "context"

// Restore runs one step of lua/restore.lua for room, by the clock nowMs
// (the restore's own, "": Redis TIME): step "begin", "members" or
// "finish", the journaled epoch, then the step's arguments as
// lua/restore.lua lists them. KEYS: the room's. Reply {'OK'} or
// {'ERROR', code} (ScriptError; Options.Lost is not applied).
func (g *Gateway) Restore(ctx context.Context, room, nowMs, step, epoch string, args ...any) error {
	argv := append([]any{nowMs, "", step, epoch}, args...)
	r, err := restoreScript.Run(ctx, g.rdb, roomKeysOf{room}.keys(), argv...).Slice()
	_, err = reply(r, err, room)
	return err
}
