//go:build !race

package issuer

// raceEnabled: built with -race (race_on_internal_test.go).
const raceEnabled = false
