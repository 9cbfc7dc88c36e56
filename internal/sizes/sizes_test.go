package sizes

import "testing"

func TestHuman(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 999: "999 B", 1000: "1.0 kB", 131568: "131.6 kB", 4_200_000_000: "4.2 GB", 1 << 62: "4.6 EB"} {
		if got := Human(n); got != want {
			t.Errorf("Human(%d) = %q, want %q", n, got, want)
		}
	}
}
