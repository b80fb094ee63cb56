package figures

import (
	"strings"
	"testing"
	"time"
)

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 3 << 20: "3.0 MiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseAge(t *testing.T) {
	for in, want := range map[string]time.Duration{"30d": 30 * 24 * time.Hour, "0d": 0, "12h": 12 * time.Hour, "90m": 90 * time.Minute} {
		if got, err := ParseAge(in); err != nil || got != want {
			t.Errorf("ParseAge(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "d", "-1d", "1.5d", "-2h", "soon"} {
		if _, err := ParseAge(bad); err == nil {
			t.Errorf("ParseAge(%q) took it", bad)
		} else if !strings.Contains(err.Error(), "such as 12h, 90m or 30d") {
			t.Errorf("ParseAge(%q): %v, want the forms it takes named", bad, err)
		}
	}
}
