package figures

import (
	"strings"
	"testing"
)

func TestUSD(t *testing.T) {
	for v, want := range map[float64]string{0: "$0", 0.0123456: "$0.0123", 0.0000112: "$0.000011", 0.00005: "$0.00005",
		0.00025: "$0.00025", 0.0002: "$0.0002", 0.42: "$0.42", 0.5: "$0.50", 0.102: "$0.102", 0.99996: "$1.00",
		0.0032000000000000006: "$0.0032", 2.5: "$2.50", 1234.5: "$1235", -0.00042: "-$0.00042"} {
		if got := USD(v); got != want {
			t.Errorf("USD(%v) = %s, want %s", v, got, want)
		}
	}
}

func TestUSDLabelsAreDistinct(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want string
	}{
		{[]float64{0.0002, 0.00025, 0.0003}, "$0.0002 $0.00025 $0.0003"},
		{[]float64{0.00021, 0.000215, 0.00022}, "$0.00021 $0.000215 $0.00022"},
		{[]float64{1.001, 1.002, 1.002}, "$1.001 $1.002 $1.002"},
		{[]float64{0, 0.5, 1}, "$0 $0.50 $1.00"},
	} {
		if got := strings.Join(USDLabels(c.in), " "); got != c.want {
			t.Errorf("USDLabels(%v) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestRoundUSD(t *testing.T) {
	for v, want := range map[float64]float64{0.0032000000000000006: 0.0032, 0.1 + 0.2: 0.3, 0.000012345: 0.000012345, 0: 0} {
		if got := RoundUSD(v); got != want {
			t.Errorf("RoundUSD(%v) = %v, want %v", v, got, want)
		}
	}
}

func TestChanges(t *testing.T) {
	if got := USDChange(-0.00042); got != "-$0.00042" {
		t.Errorf("USDChange = %s", got)
	}
	if got := DurationChange(1500); got != "+1.50s" {
		t.Errorf("DurationChange = %s", got)
	}
}

func TestDuration(t *testing.T) {
	for ms, want := range map[float64]string{0: "0s", 0.084: "84µs", 12.34: "12.3ms", 1500: "1.50s", 125000: "2m5s"} {
		if got := Duration(ms); got != want {
			t.Errorf("Duration(%v) = %s, want %s", ms, got, want)
		}
	}
}
