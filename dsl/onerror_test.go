package dsl

import "testing"

// TestOnError checks the one reading of on_error that the checker, the
// type of a node's output, the graph and the runtime share.
func TestOnError(t *testing.T) {
	for _, c := range []struct {
		in      OnError
		handled bool
		target  string
	}{
		{"", false, ""},
		{OnErrorFail, false, ""},
		{OnErrorContinue, true, ""},
		{"recover", true, "recover"},
	} {
		if got := c.in.Handled(); got != c.handled {
			t.Errorf("OnError(%q).Handled() = %v, want %v", c.in, got, c.handled)
		}
		if got := c.in.Target(); got != c.target {
			t.Errorf("OnError(%q).Target() = %q, want %q", c.in, got, c.target)
		}
	}
}
