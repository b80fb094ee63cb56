// Package figures writes money and durations the one way every front end
// shows them (the CLI's lines and tables, flowrun show, the web UI, batch
// reports), so that one amount never reads three ways in three places,
// and rounds computed money so that sums carry no floating-point noise
// into JSON (0.0032, not 0.0032000000000000006).
package figures

import (
	"fmt"
	"math"
	"time"
)

// USD is an amount as a person reads it: four decimals, or two
// significant digits below a hundredth of a cent, so that a cheap item
// does not read as free; whole dollars from $100 on; nothing spent is $0.
func USD(v float64) string {
	switch {
	case v == 0:
		return "$0"
	case v >= 100:
		return fmt.Sprintf("$%.0f", math.Round(v))
	case v >= 1:
		return fmt.Sprintf("$%.2f", v)
	case v > 0 && v < 0.0001:
		return fmt.Sprintf("$%.*f", 1-int(math.Floor(math.Log10(v))), v)
	}
	return fmt.Sprintf("$%.4f", v)
}

// USDChange is a change in an amount: "+$0.0004", "-$1.20".
func USDChange(v float64) string { return sign(v) + USD(math.Abs(v)) }

// DurationChange is a change in a span given in milliseconds: "+1.50s".
func DurationChange(ms float64) string { return sign(ms) + Duration(math.Abs(ms)) }

func sign(v float64) string {
	if v < 0 {
		return "-"
	}
	return "+"
}

// RoundUSD drops the floating-point noise of sums and products of prices:
// amounts are kept to a billionth of a dollar, far below any price.
func RoundUSD(v float64) float64 {
	return math.Round(v*1e9) / 1e9
}

// Duration is a span given in milliseconds as a person reads it: µs, ms
// or seconds with their decimals, whole seconds from two minutes on.
func Duration(ms float64) string {
	switch {
	case ms <= 0:
		return "0s"
	case ms < 1:
		return fmt.Sprintf("%.0fµs", ms*1000)
	case ms < 1000:
		return fmt.Sprintf("%.1fms", ms)
	case ms < 120000:
		return fmt.Sprintf("%.2fs", ms/1000)
	}
	return time.Duration(ms * float64(time.Millisecond)).Round(time.Second).String()
}
