package batch

import (
	"fmt"
	"strings"
	"testing"
)

// TestVariants: pipeline files crossed with every value of every axis,
// each variant overriding the models its axes name.
func TestVariants(t *testing.T) {
	vs, err := Variants([]string{"dir/a.yaml", "b.yaml"}, []string{"model.default=m1, m2", "model.judge=j"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vs {
		got = append(got, fmt.Sprintf("%s|%s|%s", v.Label, v.Pipeline, strings.Join(v.Models, ",")))
	}
	want := []string{
		"a.yaml model.default=m1 model.judge=j|dir/a.yaml|default=m1,judge=j",
		"a.yaml model.default=m2 model.judge=j|dir/a.yaml|default=m2,judge=j",
		"b.yaml model.default=m1 model.judge=j|b.yaml|default=m1,judge=j",
		"b.yaml model.default=m2 model.judge=j|b.yaml|default=m2,judge=j",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("variants\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, bad := range []string{"default=m1", "model.=m1", "model.default=", "model.default=a,,b"} {
		if _, err := Variants([]string{"p.yaml"}, []string{bad}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
