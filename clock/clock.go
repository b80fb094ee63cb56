// Package clock is the time that runs wait on. Code that waits (retry
// backoff, rate limits) asks a Clock rather than package time, so that a
// test can let hours pass at once, as Temporal's test environment fires
// timers without waiting.
//
// Guarantees:
//   - Sleep returns ctx.Err() when ctx ends first, on every Clock.
//   - Real waits as the system's time does.
//   - Fake never waits: its time moves forward by each Sleep, which
//     returns at once, and it keeps every wait asked of it.
package clock

import (
	"context"
	"sync"
	"time"
)

// Clock tells the time and waits.
type Clock interface {
	Now() time.Time
	// Sleep waits d, or until ctx ends: then it returns ctx.Err().
	Sleep(ctx context.Context, d time.Duration) error
}

// Real is the system's clock.
type Real struct{}

// Now is time.Now.
func (Real) Now() time.Time { return time.Now() }

// Sleep waits d on a timer.
func (Real) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Fake is a clock whose time moves only when something sleeps on it. It
// is safe for concurrent use.
type Fake struct {
	mu    sync.Mutex
	now   time.Time
	slept []time.Duration
}

// NewFake returns a Fake whose time starts at start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now is the fake time: the start plus every wait so far.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Sleep moves the time d forward and returns at once.
func (f *Fake) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(max(d, 0))
	f.slept = append(f.slept, d)
	return nil
}

// Slept lists the waits asked of the clock, in order.
func (f *Fake) Slept() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.slept...)
}
