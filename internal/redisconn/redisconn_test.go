package redisconn_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/redisconn"
	"github.com/flashgate/flashgate/internal/testing/redistest"
)

func TestOpenModes(t *testing.T) {
	for _, c := range []struct {
		url  string
		mode redisconn.Mode
		typ  any
	}{
		{"redis://127.0.0.1:6379/0", redisconn.Standalone, &redis.Client{}},
		{"rediss://u:p@127.0.0.1:6380/1?dial_timeout=2s", redisconn.Standalone, &redis.Client{}},
		{"redis+sentinel://127.0.0.1:26379?master_name=mymaster&addr=127.0.0.1:26380", redisconn.Sentinel, &redis.Client{}},
		{"redis+cluster://127.0.0.1:7000?addr=127.0.0.1:7001", redisconn.Cluster, &redis.ClusterClient{}},
	} {
		c := c
		t.Run(c.url, func(t *testing.T) {
			cl, mode, err := redisconn.Open(c.url)
			require.NoError(t, err)
			defer cl.Close()
			assert.Equal(t, c.mode, mode)
			assert.IsType(t, c.typ, cl)
		})
	}
}

func TestOpenErrors(t *testing.T) {
	for _, u := range []string{"", "localhost:6379", "http://x", "redis+sentinel://127.0.0.1:26379",
		"redis+cluster://127.0.0.1:7000?bogus=1", "memcache://x"} {
		_, _, err := redisconn.Open(u)
		assert.Error(t, err, u)
	}
	_, _, err := redisconn.Open("redis://user:s3cret@127.0.0.1:6379/notanumber")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret")
}

func TestOpenStandaloneTalks(t *testing.T) {
	srv := redistest.Start(t)
	cl, _, err := redisconn.Open("redis://" + srv.Addr + "/0")
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.Ping(context.Background()).Err())
}
