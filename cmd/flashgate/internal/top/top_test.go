package top_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/cmd/flashgate/internal/top"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/server"
)

func sample(room string, atMs, waiting, admitted int64) top.Sample {
	return top.Sample{Room: room, State: "open", Waiting: waiting, Admitted: admitted, AtMs: atMs}
}

// TestTracker: admissions per minute over the last minute of samples (the
// server's clock), the ETA of the tail from it, "stalled" when people wait
// and nobody was admitted, and a history dropped when the counter goes back
// (Redis lost the room).
func TestTracker(t *testing.T) {
	var tr top.Tracker
	r := tr.Update([]top.Sample{sample("a", 0, 100, 0), sample("b", 0, 0, 0)})
	assert.Negative(t, r[0].PerMinute, "no rate from one sample")
	assert.Negative(t, r[0].ETA)
	assert.Zero(t, r[1].ETA, "nobody waiting: no wait")

	r = tr.Update([]top.Sample{sample("a", 10_000, 90, 10), sample("b", 10_000, 5, 0)})
	assert.InDelta(t, 60, r[0].PerMinute, 1e-9) // 10 in 10 s
	assert.Equal(t, 90*time.Second, r[0].ETA)   // 90 waiting at 1/s
	assert.Zero(t, r[1].PerMinute)
	assert.Negative(t, r[1].ETA, "waiting, nobody admitted: unbounded")

	// 70 s later the first sample is out of the window: the rate is over 10 … 70 s.
	r = tr.Update([]top.Sample{sample("a", 70_000, 30, 130)})
	assert.InDelta(t, 120, r[0].PerMinute, 1e-9) // 120 in 60 s
	assert.Equal(t, 15*time.Second, r[0].ETA)

	// The counter went back: the room was lost and recreated.
	r = tr.Update([]top.Sample{sample("a", 71_000, 3, 1)})
	assert.Negative(t, r[0].PerMinute)
}

// TestRender: the table's columns, the stalled and error rows.
func TestRender(t *testing.T) {
	var tr top.Tracker
	tr.Update([]top.Sample{sample("a", 0, 10, 0)})
	s := sample("a", 1000, 10, 0)
	s.Live, s.Config.Capacity = 3, 5
	rows := tr.Update([]top.Sample{s, {Room: "broken", Err: "boom"}})
	var b bytes.Buffer
	top.Render(&b, "http://x", time.Unix(0, 0), rows, nil)
	out := b.String()
	assert.Contains(t, out, "ADMITTED/MIN")
	assert.Regexp(t, `a\s+open\s+10\s+3/5\s+0\s+stalled`, out)
	assert.Regexp(t, `broken(\s+-){5}\s+boom`, out)
}

// TestRunAgainstServer: top reads a real flashgate's admin API: every room
// with its waiting and live/capacity; a refused token is shown, not fatal.
func TestRunAgainstServer(t *testing.T) {
	rdb := redistest.Client(t)
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	is, err := issuer.New(issuer.Config{Redis: rdb, Signer: ring, WaitingSecret: bytes.Repeat([]byte{7}, 32)})
	require.NoError(t, err)
	srv, err := server.New(server.Options{Issuer: is, Keys: ring, AdminToken: "top-secret-token"})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Listen(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })

	ctx := context.Background()
	a, b := redistest.Room("topa"), redistest.Room("topb")
	_, err = is.SetRoom(ctx, a, issuer.RoomConfig{State: issuer.RoomPaused, Capacity: 7})
	require.NoError(t, err)
	_, err = is.SetRoom(ctx, b, issuer.RoomConfig{State: issuer.RoomOpen, Capacity: 2})
	require.NoError(t, err)
	for _, u := range []string{"u1", "u2", "u3"} {
		_, err := is.Enter(ctx, a, u)
		require.NoError(t, err)
	}

	base := "http://" + ln.Addr().String()
	var out bytes.Buffer
	require.NoError(t, top.Run(ctx, &out, top.Options{Client: top.Client{Base: base, Token: "top-secret-token"},
		Every: time.Millisecond, Frames: 2}))
	frames := strings.Split(out.String(), "flashgate top")
	require.Len(t, frames, 3, out.String())
	assert.Regexp(t, a+`\s+paused\s+3\s+0/7\s`, frames[2])
	assert.Regexp(t, b+`\s+open\s+0\s+0/2\s`, frames[2])

	out.Reset()
	require.NoError(t, top.Run(ctx, &out, top.Options{Client: top.Client{Base: base, Token: "wrong"}, Frames: 1}))
	assert.Contains(t, out.String(), "cannot read the rooms")
	assert.Contains(t, out.String(), "401 admin_unauthorized")

	assert.Error(t, top.Run(ctx, &out, top.Options{Client: top.Client{Base: base}}), "no token")
}
