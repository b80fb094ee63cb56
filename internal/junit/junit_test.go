package junit

import (
	"strings"
	"testing"
)

// TestTimesAreMilliseconds: a case's and a suite's time read as a person
// writes seconds, not with a float's binary noise.
func TestTimesAreMilliseconds(t *testing.T) {
	var b strings.Builder
	err := Write(&b, []Suite{{Name: "s", Cases: []Case{
		{Name: "a", Seconds: 0.07195900000000001},
		{Name: "b", Seconds: 0.1 + 0.2, Failure: &Problem{Message: "label: billing, expected: account"}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{`<testsuite name="s" tests="2" failures="1" errors="0" skipped="0" time="0.372">`,
		`<testcase name="a" classname="" time="0.072">`, `<testcase name="b" classname="" time="0.300">`} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in\n%s", want, out)
		}
	}
}
