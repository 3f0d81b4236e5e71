//go:build race

package issuer

// raceEnabled: built with -race, whose sync.Pool drops a quarter of what it
// is given (so allocation counts are the detector's, not the code's).
const raceEnabled = true
