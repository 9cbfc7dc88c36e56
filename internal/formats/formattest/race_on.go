//go:build race

package formattest

// RaceEnabled is set when the race detector is on: it reserves terabytes
// of address space (so no RLIMIT_AS can hold it), multiplies memory use and
// slows parsing about tenfold, so memory tests neither limit nor measure,
// and take smaller inputs.
const RaceEnabled = true
