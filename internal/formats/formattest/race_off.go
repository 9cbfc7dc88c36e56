//go:build !race

package formattest

// RaceEnabled is set when the race detector is on (see race_on.go).
const RaceEnabled = false
