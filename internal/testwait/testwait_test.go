package testwait

import (
	"flag"
	"testing"
	"time"
)

func TestBudgetFollowsTheTimeout(t *testing.T) {
	f := flag.Lookup("test.timeout")
	was := f.Value.String()
	t.Cleanup(func() { _ = f.Value.Set(was) })
	for _, tc := range []struct {
		timeout string
		want    time.Duration
	}{
		{"30m", 29 * time.Minute},
		{"10m", 9 * time.Minute},
		{"90s", 45 * time.Second},
		{"0", time.Hour},
	} {
		if err := f.Value.Set(tc.timeout); err != nil {
			t.Fatal(err)
		}
		if got := Budget(); got != tc.want {
			t.Errorf("-timeout %s: Budget() = %s, want %s", tc.timeout, got, tc.want)
		}
	}
}

func TestContextEndsWithTheTest(t *testing.T) {
	var ctx interface{ Err() error }
	t.Run("inner", func(t *testing.T) {
		c := Context(t)
		if d, ok := c.Deadline(); !ok || time.Until(d) <= 0 {
			t.Fatalf("deadline %v %v: want one in the future", d, ok)
		}
		ctx = c
	})
	if ctx.Err() == nil {
		t.Fatal("the context outlived its test")
	}
}
