// Package testwait bounds tests' waits for things that must happen (a
// subprocess to exit, a server to answer, an event to arrive) by the test
// binary's own -timeout instead of a fixed guess. A fixed bound that is
// ample on a quiet machine fails on a loaded one; this one slows a test
// down on a loaded machine and still fails a real hang, with the test's
// own message, before go test's timeout panic. Hang bounds the other kind
// of wait, for what arrives within seconds when all is well and never when
// a bug hangs it, so that such a flake fails in minutes, not at -timeout.
package testwait

import (
	"context"
	"flag"
	"testing"
	"time"
)

// hangBound caps Hang: ample for what takes seconds on a quiet machine
// even when the machine is loaded many times over, short enough that a
// hung test fails before anyone waiting on CI gives up on it.
const hangBound = 3 * time.Minute

// margin is what is left of the binary's timeout when a wait gives up:
// time for the test to report, kill what it started and clean up.
const margin = time.Minute

// Budget is how long a test may wait for something that must happen.
// Call it from a test (or TestMain after flag.Parse): the testing flags
// must be parsed.
func Budget() time.Duration {
	timeout := time.Duration(0)
	if f := flag.Lookup("test.timeout"); f != nil {
		if g, ok := f.Value.(flag.Getter); ok {
			timeout, _ = g.Get().(time.Duration)
		}
	}
	switch {
	case timeout <= 0: // -timeout 0: go test never gives up, nor do we, for long
		return time.Hour
	case timeout > 2*margin:
		return timeout - margin
	default:
		return timeout / 2
	}
}

// Context ends after Budget, or when t ends.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Budget())
	t.Cleanup(cancel)
	return ctx
}

// Hang is how long a test may wait for something that, when all is well,
// arrives within seconds and that a bug would make never arrive: the next
// line of a live stream, a run told to stop, a model call about to start.
// Waiting Budget for those turns a flake into half an hour of nothing
// before the failure; Hang fails it within a few minutes, and never later
// than Budget.
func Hang() time.Duration {
	return min(Budget(), hangBound)
}

// HangContext ends after Hang, or when t ends.
func HangContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Hang())
	t.Cleanup(cancel)
	return ctx
}

// pollEvery is how often Until looks again: often enough that a test
// hardly waits longer than the condition takes, rarely enough that the
// looking costs nothing next to what the test runs.
const pollEvery = 10 * time.Millisecond

// Until reports whether cond came to hold within Hang, looking again
// every few milliseconds; a false answer is the caller's to describe.
func Until(cond func() bool) bool {
	deadline := time.Now().Add(Hang())
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollEvery)
	}
	return true
}
