package roomkey

import "testing"

// TestKeys pins the layout the scripts (KEYS order) and the tests of other
// packages spell out.
func TestKeys(t *testing.T) {
	want := []string{"config", "waiting", "active", "users", "seq", "admno", "admits", "bucket", "stats", "ended",
		"bans", "banwhy", "unclaimed", "priority", "invites", "laneseqs", "journal"}
	got := All("r")
	if len(got) != len(want) {
		t.Fatalf("All: %d keys, want %d", len(got), len(want))
	}
	for i, n := range want {
		if got[i] != "fg:{r}:"+n || Key("r", n) != got[i] {
			t.Errorf("key %d: %q, want fg:{r}:%s", i+1, got[i], n)
		}
	}
	if m := Minted("r", "e.1.2.3"); m != "fg:{r}:minted:e.1.2.3" {
		t.Errorf("Minted: %q", m)
	}
	if e := Exporter("r"); e != "fg:{r}:exporter" {
		t.Errorf("Exporter: %q", e)
	}
}
