package main

import (
	"strings"
	"testing"
)

// TestConfigurations runs every configuration small, through the same
// code as the suite, and checks each line's keys and results.
func TestConfigurations(t *testing.T) {
	for _, mode := range []string{"loop", "fanout"} {
		for _, model := range []string{"fn", "fakelist"} {
			for _, ckpt := range []string{"none", "memory", "sqlite"} {
				c := config{mode: mode, n: 20, model: model, ckpt: ckpt, repeats: 1}
				line, err := measure(c, 0, "", "")
				if err != nil {
					t.Fatalf("%v: %v", c, err)
				}
				per := "us_per_step="
				if mode == "fanout" {
					per = "us_per_branch="
				}
				for _, key := range []string{"mode=" + mode, "n=20", "model=" + model, "ckpt=" + ckpt, "warm_med_ms=", "cold_ms=", per} {
					if !strings.Contains(line, key) {
						t.Errorf("%v: line %q lacks %s", c, line, key)
					}
				}
				if ckpt != "none" && strings.Contains(line, "checkpoints_per_run=0 ") {
					t.Errorf("%v: no checkpoints: %s", c, line)
				}
			}
		}
	}
}
