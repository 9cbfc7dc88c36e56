package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestMemProfileAtPeak: the profile is written while the heap grows, and
// is there (a gzipped pprof profile) after stop.
func TestMemProfileAtPeak(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heap.pb.gz")
	stop := startMemProfile(path)
	var keep [][]byte
	for range 8 {
		keep = append(keep, make([]byte, 8<<20))
		runtime.GC()
		time.Sleep(30 * time.Millisecond)
	}
	stop()
	runtime.KeepAlive(keep)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Fatalf("%s is not a gzipped profile (%d bytes)", path, len(b))
	}
}
