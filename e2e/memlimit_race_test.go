//go:build race

package e2e

// underRace: the suite may run a race-built binary, which reserves more
// address space than any prlimit --as allows and uses several times the
// memory, so the memory test neither limits nor measures it.
const underRace = true
