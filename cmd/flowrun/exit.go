package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/store"
)

// exitCode is the one map from what went wrong to the exit code: what the
// person asked for cannot be done as asked (options, inputs, answers, a
// run or snapshot that does not exist or is busy, a changed pipeline) is
// invalid; a batch that misses a CI gate (--fail-under,
// --fail-on-regression, --max-broken) failed, like anything else.
func exitCode(err error) int {
	var config *engine.ConfigError
	var input *engine.InputError
	var busy *store.InProgressError
	var changed *engine.ChangedError
	var ambiguous *store.AmbiguousError
	var gate *batch.GateError
	switch {
	case errors.As(err, &gate):
		return exitFailed
	case errors.As(err, &config), errors.As(err, &input), errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrNoSnapshot),
		errors.As(err, &busy), errors.As(err, &changed), errors.As(err, &ambiguous):
		return exitInvalid
	}
	return exitFailed
}

// fail prints err after prefix, with what to type where the error calls
// for it, and returns its exit code.
func fail(stderr io.Writer, prefix string, err error) int {
	fmt.Fprintf(stderr, "%s: %s\n", prefix, explain(err))
	return exitCode(err)
}
