package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/store"
)

// Every kind of error maps to one exit code, however it is wrapped.
func TestExitCode(t *testing.T) {
	cases := []struct {
		err  error
		want int
	}{
		{&engine.ConfigError{Err: errors.New("model override")}, exitInvalid},
		{&engine.ConfigError{Err: engine.ErrNoEndpoint}, exitInvalid},
		{&engine.InputError{Err: errors.New("n: want integer")}, exitInvalid},
		{fmt.Errorf("resuming: %w", store.ErrNotFound), exitInvalid},
		{store.ErrNoSnapshot, exitInvalid},
		{&engine.ChangedError{Run: "r"}, exitInvalid},
		{&store.InProgressError{}, exitInvalid},
		{&engine.HostError{Err: errors.New("no python")}, exitFailed},
		{errors.New("disk full"), exitFailed},
	}
	for _, c := range cases {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
