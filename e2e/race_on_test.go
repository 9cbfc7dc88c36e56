//go:build race

package e2e

// raceEnabled: the suite runs with -race, so TestMain also builds mstore
// with -race for the crash and concurrency tests (raceBin).
const raceEnabled = true
