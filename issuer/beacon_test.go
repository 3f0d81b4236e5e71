package issuer_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/issuer"
)

// quicknetVectors are real published quicknet rounds (testdata/drand-quicknet.json).
type quicknetVectors struct {
	Chain  issuer.BeaconChain   `json:"chain"`
	Rounds []issuer.BeaconRound `json:"rounds"`
}

func loadQuicknet(t testing.TB) quicknetVectors {
	t.Helper()
	b, err := os.ReadFile("../testdata/drand-quicknet.json")
	if err != nil {
		t.Fatal(err)
	}
	var v quicknetVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if v.Chain != issuer.Quicknet {
		t.Fatalf("testdata chain %+v differs from issuer.Quicknet", v.Chain)
	}
	return v
}

// beaconRelay serves the stored rounds as a drand relay does (GET
// /{chain}/public/{round}; 404 for a round it lacks), on loopback.
func beaconRelay(t testing.TB, v quicknetVectors) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/"+v.Chain.Hash+"/public/")
		n, err := strconv.ParseUint(rest, 10, 64)
		if !ok || err != nil {
			http.NotFound(w, r)
			return
		}
		for _, b := range v.Rounds {
			if b.Round == n {
				_ = json.NewEncoder(w).Encode(b)
				return
			}
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestVerifyBeaconQuicknetRounds(t *testing.T) {
	v := loadQuicknet(t)
	for _, b := range v.Rounds {
		got, err := issuer.VerifyBeacon(v.Chain, b)
		if err != nil || got != b.Randomness {
			t.Fatalf("round %d: %q, %v; want randomness %s", b.Round, got, err, b.Randomness)
		}
		// Another round's signature, or one flipped bit, is refused.
		other := b
		other.Round++
		other.Randomness = ""
		if _, err := issuer.VerifyBeacon(v.Chain, other); !errors.Is(err, issuer.ErrBeaconInvalid) {
			t.Fatalf("round %d's signature accepted for round %d: %v", b.Round, other.Round, err)
		}
		flipped := b
		flipped.Signature = b.Signature[:20] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", b.Signature[20])+1)%16]) + b.Signature[21:]
		if _, err := issuer.VerifyBeacon(v.Chain, flipped); !errors.Is(err, issuer.ErrBeaconInvalid) {
			t.Fatalf("round %d: a changed signature accepted: %v", b.Round, err)
		}
		wrongRand := b
		wrongRand.Randomness = strings.Repeat("0", 64)
		if _, err := issuer.VerifyBeacon(v.Chain, wrongRand); !errors.Is(err, issuer.ErrBeaconInvalid) {
			t.Fatalf("round %d: a wrong randomness accepted: %v", b.Round, err)
		}
	}
}

func TestBeaconRoundsAndRelay(t *testing.T) {
	v := loadQuicknet(t)
	c := v.Chain
	if got := c.RoundTime(1000); got.Unix() != c.GenesisTime+999*3 {
		t.Fatalf("RoundTime(1000) = %v", got)
	}
	for _, r := range []uint64{1, 2, 1000, 657413} {
		at := c.RoundTime(r)
		if c.RoundAt(at) != r || c.RoundAt(at.Add(-time.Millisecond)) != r || c.RoundAt(at.Add(time.Millisecond)) != r+1 {
			t.Fatalf("RoundAt around round %d: %d %d %d", r, c.RoundAt(at), c.RoundAt(at.Add(-time.Millisecond)), c.RoundAt(at.Add(time.Millisecond)))
		}
	}
	if r := c.LotteryRound(c.RoundTime(1000)); !c.RoundTime(r).After(c.RoundTime(1000).Add(issuer.BeaconDelay - time.Nanosecond)) {
		t.Fatalf("LotteryRound %d comes before opens + BeaconDelay", r)
	}
	srv := beaconRelay(t, v)
	b := &issuer.Beacon{URL: srv.URL, Chain: c}
	late := c.RoundTime(657413).Add(time.Hour)
	br, rnd, err := b.Round(context.Background(), 657413, late)
	if err != nil || rnd != v.Rounds[1].Randomness || br.Round != 657413 {
		t.Fatalf("Round(657413) = %+v %q %v", br, rnd, err)
	}
	if _, _, err := b.Round(context.Background(), 657414, late); !errors.Is(err, issuer.ErrBeaconNotYet) {
		t.Fatalf("a round the relay lacks: %v, want ErrBeaconNotYet", err)
	}
	if _, _, err := b.Round(context.Background(), 1000, c.RoundTime(1000).Add(-time.Second)); !errors.Is(err, issuer.ErrBeaconNotYet) {
		t.Fatalf("a round before its time: %v, want ErrBeaconNotYet", err)
	}
}
