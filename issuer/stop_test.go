package issuer_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/verifier"
)

// TestStop: a stop pauses an open room, moves its not_before to the second
// after now (never backwards), publishes it in Directives, and completion
// refuses the admissions issued before it at once (room_stopped), while a
// completion made before the stop still repeats and admissions after the
// stop complete.
func TestStop(t *testing.T) {
	ctx := context.Background()
	is, clk, room, _ := setup(t, issuer.RoomConfig{Capacity: 10, SessionDuration: time.Minute})
	enter := func(user string) *issuer.Entry {
		e, err := is.Enter(ctx, room, user)
		require.NoError(t, err)
		require.Equal(t, flashgate.StateActive, e.State)
		return e
	}
	carol := enter("carol")
	done, err := is.Complete(ctx, room, "carol", carol.AdmissionID)
	require.NoError(t, err)
	alice := enter("alice")
	tok, err := is.Exchange(ctx, room, "alice", alice.WaitingToken)
	require.NoError(t, err)
	require.NoError(t, is.WaitMinted(ctx))
	clk.Advance(300 * time.Millisecond)

	st, err := is.Stop(ctx, room)
	require.NoError(t, err)
	assert.True(t, st.Paused, "an open room is paused by the stop")
	assert.Equal(t, issuer.RoomPaused, st.Config.State)
	assert.Equal(t, clk.Now().Unix()+1, st.NotBefore.Unix(), "the second after the stop")
	assert.ErrorIs(t, verifier.CheckNotBefore(tok.IssuedAt.Unix(), st.NotBefore.Unix()), verifier.ErrRoomStopped,
		"the edge refuses the token issued before the stop")

	_, err = is.Complete(ctx, room, "alice", alice.AdmissionID)
	assert.Equal(t, flashgate.CodeRoomStopped, flashgate.ErrorCode(err), "completion refuses it at once: %v", err)
	err = is.CheckActive(ctx, room, alice.AdmissionID)
	assert.Equal(t, flashgate.CodeRoomStopped, flashgate.ErrorCode(err), "and so does the revocation check: %v", err)
	_, err = is.CompleteMinted(ctx, room, "alice", alice.AdmissionID, tok.Token)
	assert.Equal(t, flashgate.CodeRoomStopped, flashgate.ErrorCode(err), "and with the minted token: %v", err)
	again, err := is.Complete(ctx, room, "carol", carol.AdmissionID)
	require.NoError(t, err, "a completion from before the stop still repeats")
	assert.Equal(t, done.CompletedAt, again.CompletedAt)

	d, err := is.Directives(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{room: st.NotBefore.Unix()}, d)

	// Again, in the same second: not_before stays; later: it moves on, and a
	// paused room is left as it is.
	st2, err := is.Stop(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, st.NotBefore, st2.NotBefore)
	assert.False(t, st2.Paused)
	clk.Advance(2 * time.Second)
	st3, err := is.Stop(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, st.NotBefore.Unix()+2, st3.NotBefore.Unix())

	// Reopened, after not_before: new admissions complete.
	clk.Advance(time.Second)
	_, err = is.SetState(ctx, room, issuer.RoomOpen)
	require.NoError(t, err)
	bob := enter("bob")
	require.NoError(t, is.CheckActive(ctx, room, bob.AdmissionID))
	_, err = is.Complete(ctx, room, "bob", bob.AdmissionID)
	require.NoError(t, err)

	_, err = is.Stop(ctx, room+"-none")
	assert.ErrorIs(t, err, flashgate.ErrUnknownRoom)
}
