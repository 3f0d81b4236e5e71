package server

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/issuer"
)

// TestRoomViewPreQueueAlias: a view from an older server spells only
// prequeue; a checker still reads the pre-queue's order from it, and
// pre_queue wins when both are present.
func TestRoomViewPreQueueAlias(t *testing.T) {
	for body, want := range map[string]issuer.PreQueue{
		`{"room":"r","prequeue":"shuffle"}`:                       issuer.PreQueueShuffle,
		`{"room":"r","pre_queue":"shuffle"}`:                      issuer.PreQueueShuffle,
		`{"room":"r","pre_queue":"shuffle","prequeue":"shuffle"}`: issuer.PreQueueShuffle,
	} {
		var v RoomView
		require.NoError(t, json.Unmarshal([]byte(body), &v))
		assert.Equal(t, want, v.RoomLottery().PreQueue, body)
	}
}
