//go:build !linux

package platform

// This line fails to compile on purpose: mstore is built for Linux only.
const _ = "mstore builds and runs on Linux only (syncfs, flock, renameat2; see README.md, Platform); build with GOOS=linux" + 0
