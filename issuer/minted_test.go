package issuer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
)

// Exchange notes the digest of every admission token it mints, and
// CompleteMinted completes exactly the tokens byte for byte as minted: an
// altered token, or one whose note is gone, is ErrNotMinted and changes
// nothing; the admission's own refusals (revoked, …) come once the token is
// known; a call that fails as a whole says nothing of the token
// (ErrNotMinted wrapping the cause).
func TestCompleteMinted(t *testing.T) {
	ctx := context.Background()
	is, _, room, rdb := setup(t, issuer.RoomConfig{Capacity: 10, SessionDuration: time.Minute})
	mint := func(user string) *issuer.Admission {
		e, err := is.Enter(ctx, room, user)
		require.NoError(t, err)
		require.Equal(t, flashgate.StateActive, e.State)
		a, err := is.Exchange(ctx, room, user, e.WaitingToken)
		require.NoError(t, err)
		return a
	}
	alice, bob, carol := mint("alice"), mint("bob"), mint("carol")
	require.NoError(t, is.WaitMinted(ctx))

	// The note: the digest under the admission's key, living until exp.
	key := "fg:{" + room + "}:minted:" + alice.ID
	assert.Equal(t, issuer.MintedDigest(alice.Token), rdb.Get(ctx, key).Val())
	assert.Len(t, issuer.MintedDigest(alice.Token), 32)
	ttl := rdb.PTTL(ctx, key).Val()
	assert.True(t, ttl > 55*time.Second && ttl <= time.Minute, "expires with the token: %s", ttl)

	// Altered tokens (the signature's last character, a payload character)
	// are not the minted one: nothing is read or written.
	before := redistest.Dump(t, rdb, false)
	for _, forged := range []string{alice.Token[:len(alice.Token)-1] + flip(alice.Token[len(alice.Token)-1]),
		alice.Token[:40] + flip(alice.Token[40]) + alice.Token[41:], alice.Token + "A"} {
		_, err := is.CompleteMinted(ctx, room, "alice", alice.ID, forged)
		require.ErrorIs(t, err, issuer.ErrNotMinted, forged)
	}
	// Another admission's token under alice's claims: the note is per jti.
	_, err := is.CompleteMinted(ctx, room, "alice", alice.ID, bob.Token)
	require.ErrorIs(t, err, issuer.ErrNotMinted)
	assert.Equal(t, before, redistest.Dump(t, rdb, false), "refused digests change nothing")

	// The minted token completes, then repeats.
	c, err := is.CompleteMinted(ctx, room, "alice", alice.ID, alice.Token)
	require.NoError(t, err)
	assert.False(t, c.Repeated)
	c2, err := is.CompleteMinted(ctx, room, "alice", alice.ID, alice.Token)
	require.NoError(t, err)
	assert.True(t, c2.Repeated)
	assert.Equal(t, c.CompletedAt, c2.CompletedAt)
	// Bob's token, but claims of another user: the owner check still holds.
	_, err = is.CompleteMinted(ctx, room, "alice", bob.ID, bob.Token)
	require.ErrorIs(t, err, flashgate.ErrOwnerMismatch)

	// A note that is gone (lost, expired early): ErrNotMinted; Complete (after
	// the caller's signature check) still completes.
	require.NoError(t, rdb.Del(ctx, "fg:{"+room+"}:minted:"+bob.ID).Err())
	_, err = is.CompleteMinted(ctx, room, "bob", bob.ID, bob.Token)
	require.ErrorIs(t, err, issuer.ErrNotMinted)
	_, err = is.Complete(ctx, room, "bob", bob.ID)
	require.NoError(t, err)

	// The admission's own answer, once the token is known as minted.
	_, err = is.Revoke(ctx, room, "carol", "")
	require.NoError(t, err)
	_, err = is.CompleteMinted(ctx, room, "carol", carol.ID, carol.Token)
	require.ErrorIs(t, err, flashgate.ErrRevoked)
	require.False(t, errors.Is(err, issuer.ErrNotMinted))

	// Whole-call failures and malformed claims say nothing of the token.
	_, err = is.CompleteMinted(ctx, "no-such-room", "carol", carol.ID, carol.Token)
	require.ErrorIs(t, err, issuer.ErrNotMinted)
	require.ErrorIs(t, err, flashgate.ErrUnknownRoom, "the cause is kept")
	for _, bad := range [][3]string{{room, "carol", "not-a-jti"}, {room, "", carol.ID}, {"bad room!", "carol", carol.ID}} {
		_, err = is.CompleteMinted(ctx, bad[0], bad[1], bad[2], carol.Token)
		require.ErrorIs(t, err, issuer.ErrNotMinted, "%v", bad)
	}
	assert.Zero(t, is.Observe().MintedNotesLost)
}

// failMinted is a Redis whose minted script calls fail (the others pass).
type failMinted struct{ *redis.Client }

func (f failMinted) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if issuer.ScriptName(sha) == "minted" {
		c := redis.NewCmd(ctx)
		c.SetErr(errors.New("injected: minted note refused"))
		return c
	}
	return f.Client.EvalSha(ctx, sha, keys, args...)
}

// A note that cannot be written is counted and lost: the exchange has
// answered already, and the token's completion goes through the signature
// check (ErrNotMinted, then Complete).
func TestMintedNoteLost(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	is := newIssuer(t, failMinted{rdb}, nil)
	room := redistest.Room("lost")
	_, err := is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 10})
	require.NoError(t, err)
	e, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	a, err := is.Exchange(ctx, room, "alice", e.WaitingToken)
	require.NoError(t, err, "the exchange does not wait for its note")
	require.NoError(t, is.WaitMinted(ctx))
	assert.Equal(t, int64(1), is.Observe().MintedNotesLost)
	assert.Zero(t, rdb.Exists(ctx, "fg:{"+room+"}:minted:"+a.ID).Val())
	_, err = is.CompleteMinted(ctx, room, "alice", a.ID, a.Token)
	require.ErrorIs(t, err, issuer.ErrNotMinted)
	_, err = is.Complete(ctx, room, "alice", a.ID)
	require.NoError(t, err)
}

// flip returns another base64url character than c.
func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}
