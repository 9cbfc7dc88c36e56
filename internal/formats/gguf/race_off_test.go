//go:build !race

package gguf

const raceEnabled = false
