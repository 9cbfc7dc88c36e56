// Package testenv is how a test says that something it needs from the
// machine is missing: the real third-party files in ../shared/testdata,
// Debian's python3-onnx or python3-torch, ONNX Runtime for node, GNU time,
// root, a file-system feature. On a developer's machine the test skips (or
// goes on with less) and says what to install; under
// MSTORE_REQUIRE_TESTDATA=1, which .ci/run sets, it fails instead, so that
// CI can never pass by skipping what it was meant to check.
//
// Skips that are choices (-short, opt-in soaks and benchmarks) do not go
// through here.
package testenv

import (
	"fmt"
	"os"
	"testing"
)

// Variable is the environment variable that turns missing dependencies
// into failures.
const Variable = "MSTORE_REQUIRE_TESTDATA"

// Required reports whether Variable is set to anything but "" or "0".
func Required() bool {
	v := os.Getenv(Variable)
	return v != "" && v != "0"
}

// Missing ends t because something it needs is missing; the message says
// what and how to get it. It skips, or with Required fails.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("%s (%s=%s: a missing test dependency is a failure)", msg, Variable, os.Getenv(Variable))
		return
	}
	t.Skip(msg)
}

// Degraded notes that t goes on without part of its checks because
// something is missing. It logs, or with Required marks t failed (and t
// goes on).
func Degraded(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required() {
		t.Errorf("%s (%s=%s: a missing test dependency is a failure)", msg, Variable, os.Getenv(Variable))
		return
	}
	t.Log(msg)
}
