package testenv

import (
	"fmt"
	"testing"
)

// recorder is a testing.TB that records how a test ended instead of
// ending it.
type recorder struct {
	testing.TB
	skipped, failed, fatal, logged string
}

func (r *recorder) Helper()                      {}
func (r *recorder) Skip(args ...any)             { r.skipped = fmt.Sprint(args...) }
func (r *recorder) Log(args ...any)              { r.logged = fmt.Sprint(args...) }
func (r *recorder) Errorf(f string, args ...any) { r.failed = fmt.Sprintf(f, args...) }
func (r *recorder) Fatalf(f string, args ...any) { r.fatal = fmt.Sprintf(f, args...) }

func TestMissingSkipsOrFails(t *testing.T) {
	for _, tc := range []struct {
		value    string
		required bool
	}{{"", false}, {"0", false}, {"1", true}, {"yes", true}} {
		t.Setenv(Variable, tc.value)
		if Required() != tc.required {
			t.Errorf("%s=%q: Required() = %v", Variable, tc.value, !tc.required)
		}
		r := &recorder{TB: t}
		Missing(r, "no %s", "python3-torch")
		if tc.required && (r.fatal == "" || r.skipped != "") || !tc.required && (r.skipped != "no python3-torch" || r.fatal != "") {
			t.Errorf("%s=%q: Missing skipped %q, failed %q", Variable, tc.value, r.skipped, r.fatal)
		}
		r = &recorder{TB: t}
		Degraded(r, "no %s", "/usr/bin/time")
		if tc.required && (r.failed == "" || r.logged != "") || !tc.required && (r.logged != "no /usr/bin/time" || r.failed != "") {
			t.Errorf("%s=%q: Degraded logged %q, failed %q", Variable, tc.value, r.logged, r.failed)
		}
	}
}
