// Package platform says which operating systems mstore runs on: Linux
// only. The store, the model-directory walk and checkout rely on Linux
// system calls (syncfs(2) to make a batch of files durable at once,
// sync_file_range(2), flock(2) locks that die with their process,
// renameat2(2)'s RENAME_EXCHANGE, /proc) whose portable replacements would
// change what "durable" and "atomic" mean, so there are none.
//
// Every package that makes such calls imports this one (a blank import in
// its platform.go), and the files with the calls carry //go:build linux
// (or end in _linux.go). On any other GOOS this package does not compile,
// on purpose, so `go build` stops at the one clear message in
// platform_other.go instead of a list of undefined system calls. The
// format packages (formats/...) make no such calls and build anywhere
// (TestFormatPackagesBuildAnywhere), but for formattest, the helper their
// tests share.
package platform
