package testwait

import (
	"flag"
	"testing"
	"time"
)

// setTimeout sets the test binary's -timeout until t ends.
func setTimeout(t *testing.T, timeout string) {
	f := flag.Lookup("test.timeout")
	was := f.Value.String()
	t.Cleanup(func() { _ = f.Value.Set(was) })
	if err := f.Value.Set(timeout); err != nil {
		t.Fatal(err)
	}
}

func TestBudgetAndHangFollowTheTimeout(t *testing.T) {
	for _, tc := range []struct {
		timeout string
		budget  time.Duration
		hang    time.Duration
	}{
		{"40m", 39 * time.Minute, 3 * time.Minute},
		{"30m", 29 * time.Minute, 3 * time.Minute},
		{"10m", 9 * time.Minute, 3 * time.Minute},
		{"90s", 45 * time.Second, 45 * time.Second},
		{"0", time.Hour, 3 * time.Minute},
	} {
		setTimeout(t, tc.timeout)
		if got := Budget(); got != tc.budget {
			t.Errorf("-timeout %s: Budget() = %s, want %s", tc.timeout, got, tc.budget)
		}
		if got := Hang(); got != tc.hang {
			t.Errorf("-timeout %s: Hang() = %s, want %s", tc.timeout, got, tc.hang)
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

func TestUntilGivesUpAfterHang(t *testing.T) {
	looks := 0
	if !Until(func() bool { looks++; return looks == 3 }) {
		t.Fatal("Until gave up on a condition that came to hold")
	}
	// A one-second -timeout makes Hang half a second: the condition that
	// never holds is given up on instead of waited for.
	setTimeout(t, "1s")
	if Until(func() bool { return false }) {
		t.Fatal("Until said a condition that never holds came to hold")
	}
}
