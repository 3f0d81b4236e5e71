package redistest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelSet is a master, its two replicas and one Sentinel on loopback,
// started by StartSentinel. MasterName is what the Sentinel monitors.
type SentinelSet struct {
	Master     *Server
	Replicas   []*Server
	Sentinel   *Server
	MasterName string
}

// StartSentinel starts a master, two replicas of it and a Sentinel (quorum
// 1, down-after 1 s, failover-timeout 5 s) and waits until the Sentinel
// knows both replicas, so a killed master is failed over in a few seconds
// and the promoted master still has a replica.
func StartSentinel(t testing.TB) *SentinelSet {
	t.Helper()
	s := &SentinelSet{MasterName: "fgmaster"}
	s.Master = Start(t)
	for range 2 {
		s.Replicas = append(s.Replicas, Start(t, "--replicaof", "127.0.0.1", itoa(s.Master.Port)))
	}

	dir := t.TempDir()
	port := FreePort(t)
	conf := filepath.Join(dir, "sentinel.conf")
	body := fmt.Sprintf("bind 127.0.0.1\nport %d\ndir %s\n"+
		"sentinel monitor %s 127.0.0.1 %d 1\n"+
		"sentinel down-after-milliseconds %s 1000\n"+
		"sentinel failover-timeout %s 5000\n"+
		"sentinel parallel-syncs %s 1\n", port, dir, s.MasterName, s.Master.Port, s.MasterName, s.MasterName, s.MasterName)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Sentinel = &Server{Addr: "127.0.0.1:" + itoa(port), Port: port, Dir: dir, args: []string{conf, "--sentinel"}}
	if err := s.Sentinel.start(); err != nil {
		t.Fatalf("start sentinel: %v", err)
	}
	t.Cleanup(s.Sentinel.Kill)

	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinel.Addr})
	defer sc.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		reps, err := sc.Replicas(context.Background(), s.MasterName).Result()
		if err == nil && len(reps) == len(s.Replicas) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sentinel did not discover the replica: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return s
}

// Client returns a failover client that follows the master through the Sentinel.
func (s *SentinelSet) Client(t testing.TB) *redis.Client {
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.MasterName,
		SentinelAddrs: []string{s.Sentinel.Addr}, MaxRetries: 2})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
