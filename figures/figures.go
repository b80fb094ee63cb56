// Package figures writes money and durations the one way every front end
// shows them (the CLI's lines and tables, flowrun show, the web UI, batch
// reports), so that one amount never reads three ways in three places,
// and rounds computed money so that sums carry no floating-point noise
// into JSON (0.0032, not 0.0032000000000000006).
package figures

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// USD is an amount as a person writes it: cents from a dollar on, whole
// dollars from $100; below a dollar, four decimals or two significant
// digits, whichever shows more, without trailing zeros past the cents
// ("$0.42", "$0.0032", "$0.00025", "$0.00005"), so that a cheap item does
// not read as free; nothing spent is $0.
func USD(v float64) string { return usd(v, 0) }

// USDLabels writes amounts that are read side by side (an axis's ticks,
// a histogram's bin edges) as USD does, with as many more digits as it
// takes for different amounts to read differently.
func USDLabels(vs []float64) []string {
	out := make([]string, len(vs))
	for extra := 0; extra <= 6; extra++ {
		for i, v := range vs {
			out[i] = usd(v, extra)
		}
		if distinct(vs, out) {
			break
		}
	}
	return out
}

func distinct(vs []float64, labels []string) bool {
	seen := map[string]float64{}
	for i, l := range labels {
		if v, ok := seen[l]; ok && v != vs[i] {
			return false
		}
		seen[l] = vs[i]
	}
	return true
}

// usd is USD with extra more decimals than it would show.
func usd(v float64, extra int) string {
	switch {
	case v < 0:
		return "-" + usd(-v, extra)
	case v == 0:
		return "$0"
	case v >= 100 && extra == 0:
		return fmt.Sprintf("$%.0f", math.Round(v))
	case v >= 1:
		return fmt.Sprintf("$%.*f", 2+extra, v)
	}
	decimals := max(4, 1-int(math.Floor(math.Log10(v)))) + extra
	s := strings.TrimRight(fmt.Sprintf("%.*f", decimals, v), "0")
	if _, cents, _ := strings.Cut(s, "."); len(cents) < 2 {
		s += strings.Repeat("0", 2-len(cents))
	}
	return "$" + s
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
