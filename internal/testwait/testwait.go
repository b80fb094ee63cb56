// Package testwait bounds tests' waits for things that must happen (a
// subprocess to exit, a server to answer, an event to arrive) by the test
// binary's own -timeout instead of a fixed guess. A fixed bound that is
// ample on a quiet machine fails on a loaded one; this one slows a test
// down on a loaded machine and still fails a real hang, with the test's
// own message, before go test's timeout panic.
package testwait

import (
	"context"
	"flag"
	"testing"
	"time"
)

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
