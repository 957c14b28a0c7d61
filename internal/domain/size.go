package domain

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeUnits are the units ParseSize reads, lower case.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
	"ki": 1 << 10, "kib": 1 << 10, "mi": 1 << 20, "mib": 1 << 20, "gi": 1 << 30, "gib": 1 << 30, "ti": 1 << 40, "tib": 1 << 40,
}

// ParseSize reads a number of bytes as people write it (a quota's
// max_storage): plain (1048576), or with a unit, decimal (500MB, 1.5GB)
// or binary (10GiB), in any case. Anything else is ErrInvalidArgument.
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(s)
	}
	num, unit := s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	mult, ok := sizeUnits[unit]
	if num == "" || !ok {
		return 0, Invalidf("%q is not a size: write bytes (1048576) or a number and a unit (500MB, 10GiB, 1.5TB)", s)
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		if n > math.MaxInt64/mult {
			return 0, Invalidf("%q is too large", s)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f*float64(mult) >= math.MaxInt64 {
		return 0, Invalidf("%q is not a size: write bytes (1048576) or a number and a unit (500MB, 10GiB, 1.5TB)", s)
	}
	return int64(f * float64(mult)), nil
}

// SizeText writes n bytes for people, in binary units: 10 GiB, 1.5 MiB.
func SizeText(n int64) string {
	const units = "KMGTPE"
	if n < 1<<10 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/(1<<10), 0
	for v >= 1<<10 && i < len(units)-1 {
		v /= 1 << 10
		i++
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0") + " " + units[i:i+1] + "iB"
}
