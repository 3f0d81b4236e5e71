package store

import (
	"context"

	"github.com/flashgate/flashgate/internal/roomkey"
)

// Exporter runs lua/exporter.lua (no prelude): takes or renews replica's
// lease on room's metrics export for leaseMs. KEYS: fg:{room}:exporter;
// ARGV: replica, lease (ms). True when replica holds it.
func (g *Gateway) Exporter(ctx context.Context, room, replica string, leaseMs int64) (bool, error) {
	n, err := g.runInt(ctx, exporterScript, "exporter", "held", []string{roomkey.Exporter(room)}, replica, leaseMs)
	return n == 1, err
}
