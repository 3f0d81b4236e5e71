package redistest

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a local Redis Cluster of masters started by StartCluster.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts n redis-server masters with cluster mode on loopback
// ports, joins them with `redis-cli --cluster create` (slots spread evenly,
// no replicas) and waits until the cluster reports cluster_state:ok.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatalf("redis-cli not found: install redis-server (apt-get install redis-server) or run `make test`")
	}
	c := &Cluster{}
	args := []string{"--cluster", "create"}
	for range n {
		s := Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000")
		c.Nodes = append(c.Nodes, s)
		args = append(args, s.Addr)
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.Command("redis-cli", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok := true
		for _, s := range c.Nodes {
			info, _ := exec.Command("redis-cli", "-h", "127.0.0.1", "-p", itoa(s.Port), "cluster", "info").Output()
			if !strings.Contains(string(info), "cluster_state:ok") {
				ok = false
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster did not reach cluster_state:ok")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return c
}

// Client returns a ClusterClient for the cluster, closed at cleanup.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	addrs := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		addrs[i] = s.Addr
	}
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = cl.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ForEachShard(ctx, func(ctx context.Context, s *redis.Client) error { return s.Ping(ctx).Err() }); err != nil {
		t.Fatalf("cluster client: %v", err)
	}
	return cl
}
