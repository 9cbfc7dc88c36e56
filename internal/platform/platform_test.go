package platform

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const self = "github.com/mstore/mstore/internal/platform"

// TestSystemCallPackagesImportPlatform: every package of the module that
// imports syscall or golang.org/x/sys/unix depends on this package, so a
// build for another OS stops at its message instead of at an undefined
// system call.
func TestSystemCallPackagesImportPlatform(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}|{{join .Deps \" \"}}", "github.com/mstore/mstore/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.Split(line, "|")
		if len(parts) != 3 || parts[0] == self {
			continue
		}
		imports, deps := strings.Fields(parts[1]), strings.Fields(parts[2])
		if !slices.Contains(imports, "syscall") && !slices.Contains(imports, "golang.org/x/sys/unix") {
			continue
		}
		checked++
		if !slices.Contains(deps, self) {
			t.Errorf("%s makes system calls and does not import %s (add a platform.go with the blank import, as store has)", parts[0], self)
		}
	}
	if checked == 0 {
		t.Fatal("no package of the module imports syscall: go list printed nothing useful")
	}
}

// TestOtherOSStopsWithMessage: built for another OS, the package fails
// with the message that says mstore is for Linux.
func TestOtherOSStopsWithMessage(t *testing.T) {
	for _, goos := range []string{"darwin", "windows"} {
		cmd := exec.Command("go", "build", self)
		cmd.Env = append(cmd.Environ(), "GOOS="+goos, "GOARCH=amd64")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "mstore builds and runs on Linux only") {
			t.Errorf("GOOS=%s go build: %v, want the Linux-only message\n%s", goos, err, out)
		}
	}
}

// TestFormatPackagesBuildAnywhere: the parsers (formats/...) make no
// system calls, so they build for any OS; formattest, the helper their
// tests share, runs parses under an address-space limit (setrlimit) and
// is the one that imports this package.
func TestFormatPackagesBuildAnywhere(t *testing.T) {
	out, err := exec.Command("go", "list", "github.com/mstore/mstore/internal/formats/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		if !strings.HasSuffix(p, "/formattest") {
			pkgs = append(pkgs, p)
		}
	}
	if len(pkgs) < 5 {
		t.Fatalf("go list found %d format packages: %v", len(pkgs), pkgs)
	}
	cmd := exec.Command("go", append([]string{"build"}, pkgs...)...)
	cmd.Env = append(cmd.Environ(), "GOOS=darwin", "GOARCH=amd64") // as TestOtherOSStopsWithMessage: one cross-built standard library
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("GOOS=darwin go build of the format packages: %v\n%s", err, out)
	}
}
