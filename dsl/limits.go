package dsl

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Maxima are the largest values of a pipeline's numeric fields, by field
// name wherever the field appears (limits, models, node kinds, http_get).
// Each guards something a larger value would break: an int that
// overflows when scaled to bytes, a worker pool or buffer sized by the
// value, a retry loop with no practical end. The schema carries each as
// its field's maximum, so a larger value is a positioned error at load;
// a field given as an expression (max_iterations) is checked against it
// when it is evaluated.
var Maxima = map[string]float64{
	"max_steps":             1_000_000,
	"max_cost_usd":          1_000_000,
	"max_file_kb":           64 << 10, // 64 MiB, held in memory
	"max_bytes":             64 << 20, // http_get's body, held in memory
	"max_reply_bytes":       1 << 30,  // a model's reply, held in memory while decoded
	"max_iterations":        1_000_000,
	"max_concurrency":       10_000,
	"max_attempts":          100,
	"repair_retries":        100,
	"tool_retries":          100,
	"max_tokens":            10_000_000,
	"temperature":           2,
	"rpm":                   1_000_000,
	"tpm":                   1_000_000_000,
	"input_per_mtok":        10_000_000,
	"output_per_mtok":       10_000_000,
	"cached_input_per_mtok": 10_000_000,
}

// MaxDuration is the longest any duration field may be: a longer one
// (time.ParseDuration stops at about 290 years) would otherwise read as no
// limit at all.
const MaxDuration = 30 * 24 * time.Hour

// withMaxima sets the maximum of every numeric field of the schema named
// in Maxima, and says in the duration definition how long it may be.
func withMaxima(schema map[string]any) {
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if props, ok := x["properties"].(map[string]any); ok {
				for name, p := range props {
					p, ok := p.(map[string]any)
					if most, named := Maxima[name]; ok && named && numeric(p) {
						if _, set := p["maximum"]; !set {
							p["maximum"] = most
						}
					}
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(schema)
	d := schema["$defs"].(map[string]any)["duration"].(map[string]any)
	d["description"] = fmt.Sprintf("%s At most %s.", d["description"], shortDuration(MaxDuration))
}

// numeric reports a schema that admits a number.
func numeric(p map[string]any) bool {
	switch t := p["type"].(type) {
	case string:
		return t == "integer" || t == "number"
	case []any:
		for _, x := range t {
			if x == "integer" || x == "number" {
				return true
			}
		}
	}
	return false
}

// shortDuration writes d without zero minutes and seconds: 720h, not 720h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	return strings.TrimSuffix(s, "0m")
}

// durationShape is the schema's pattern for a duration.
var durationShape = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`)

// duration parses a duration field; the schema has already checked its
// shape, so a well-shaped value that does not parse is too long.
func (f *file) duration(n *yaml.Node) time.Duration {
	s, ok := str(n)
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil && !durationShape.MatchString(s):
		return 0
	case err != nil || d > MaxDuration:
		f.l.errorf(f.pos(n), "duration %q is more than %s, the most a duration can be", s, shortDuration(MaxDuration))
		return 0
	case d <= 0:
		f.l.errorf(f.pos(n), "duration %q must be greater than zero", s)
		return 0
	}
	return d
}
