package remote

import "time"

// RefreshIfDue runs one tick of the background loop: it fetches the set
// when the background refresh is due by Config.Now, and waits for it.
func (s *KeySet) RefreshIfDue() { s.refreshIfDue() }

// SetMinCheckEvery lowers the floor of Config.CheckEvery for one test and
// returns a function that restores it.
func SetMinCheckEvery(d time.Duration) (restore func()) {
	old := minCheckEvery
	minCheckEvery = d
	return func() { minCheckEvery = old }
}
