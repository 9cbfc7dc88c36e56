package sizes

import "fmt"

// Human prints n with a decimal unit, as `du -h --si` would: 999 B,
// 1.0 kB, 131.6 kB, 4.2 GB.
func Human(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}
