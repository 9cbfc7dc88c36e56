//go:build race

package gguf

// raceEnabled: the race detector makes parsing a large vocabulary about ten
// times slower, so the real-file tests take a few files only.
const raceEnabled = true
