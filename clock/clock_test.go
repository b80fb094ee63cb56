package clock

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// A fake hour passes at once, and the waits are kept in order.
func TestFakeSleepMovesTimeWithoutWaiting(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFake(start)
	began := time.Now()
	for _, d := range []time.Duration{time.Hour, 30 * time.Minute} {
		if err := f.Sleep(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	if waited := time.Since(began); waited > time.Second {
		t.Errorf("the fake clock waited %s", waited)
	}
	if got := f.Now(); !got.Equal(start.Add(90 * time.Minute)) {
		t.Errorf("now %s, want 90 minutes after the start", got)
	}
	if got := f.Slept(); !slices.Equal(got, []time.Duration{time.Hour, 30 * time.Minute}) {
		t.Errorf("slept %v", got)
	}
}

// Every clock's Sleep ends with the context.
func TestSleepEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, c := range map[string]Clock{"real": Real{}, "fake": NewFake(time.Time{})} {
		if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v, want context.Canceled", name, err)
		}
	}
}
