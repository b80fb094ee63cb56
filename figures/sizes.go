package figures

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Bytes is a size as a person reads it: MiB, KiB or bytes.
func Bytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// ParseAge reads an age: a Go duration (12h, 90m), or whole days as 30d.
func ParseAge(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bad age %q: give a duration such as 12h, 90m or 30d", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("bad age %q: give a duration such as 12h, 90m or 30d", s)
	}
	return d, nil
}
