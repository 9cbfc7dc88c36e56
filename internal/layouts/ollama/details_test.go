package ollama

import "testing"

// TestHumanNumber: the parameter sizes ollama prints, as its own
// format.TestHumanNumber (v0.17.4) has them.
func TestHumanNumber(t *testing.T) {
	for n, want := range map[uint64]string{0: "0", 999: "999", 1000: "1K", 1001: "1K", 513048: "513K", 1000000: "1M",
		125000000: "125M", 500500000: "500.50M", 500550000: "500.55M", 1000000000: "1B", 2800000000: "2.8B",
		2850000000: "2.9B", 1000000000000: "1000B"} {
		if got := humanNumber(n); got != want {
			t.Errorf("humanNumber(%d) = %s, want %s", n, got, want)
		}
	}
}
