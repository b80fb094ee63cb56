package errclass

import (
	"errors"
	"fmt"
	"testing"
)

type classed struct{ c Class }

func (e classed) Error() string { return "failed" }
func (e classed) Class() Class  { return e.c }

func TestOfReadsTheChain(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Class
	}{
		{fmt.Errorf("node a: %w", classed{RateLimit}), RateLimit},
		{fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", classed{CompileError})), CompileError},
		{errors.New("plain"), ""},
		{nil, ""},
	} {
		if got := Of(tc.err); got != tc.want {
			t.Errorf("Of(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
