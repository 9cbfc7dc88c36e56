package main

import (
	"strconv"
	"strings"

	"github.com/mstore/mstore/internal/sizes"
)

// humanBytes prints n with a decimal unit, as `du -h --si` would; the
// progress bar prints sizes the same way.
func humanBytes(n int64) string { return sizes.Human(n) }

var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40,
}

// parseSize reads sizes as Hugging Face writes them: "5GB" is 5·10⁹ bytes,
// "500MiB" is 500·2²⁰.
func parseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	mult, ok := sizeUnits[unit]
	v, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || v <= 0 || v*float64(mult) > 1<<62 {
		return 0, usageError("size %q: want a positive number with an optional unit (B, KB, MB, GB, KiB, MiB, GiB)", s)
	}
	return int64(v * float64(mult)), nil
}
