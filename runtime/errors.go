package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Error classes. Executors return errors that implement Classed to choose
// one; anything else is ClassError, which is not retried.
const (
	ClassRateLimit     = "rate_limit"
	ClassServer        = "server"
	ClassTimeout       = "timeout"
	ClassConnection    = "connection"
	ClassInvalidOutput = "invalid_output"
	ClassCritical      = "critical"
	ClassExpression    = "expression"
	ClassLoopExhausted = "loop_exhausted"
	ClassError         = "error"
)

// defaultRetryOn is what a retry: block without retry_on retries.
var defaultRetryOn = []string{ClassRateLimit, ClassTimeout, ClassServer, ClassConnection, ClassInvalidOutput}

// Classed is an error that knows its class.
type Classed interface {
	error
	Class() string
}

type classedError struct {
	class string
	err   error
}

func (e *classedError) Error() string { return e.err.Error() }
func (e *classedError) Unwrap() error { return e.err }
func (e *classedError) Class() string { return e.class }

// Errorf returns an error of the given class.
func Errorf(class, format string, args ...any) error {
	return &classedError{class: class, err: fmt.Errorf(format, args...)}
}

// ClassOf returns an error's class.
func ClassOf(err error) string {
	var c Classed
	if errors.As(err, &c) {
		return c.Class()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ClassTimeout
	}
	return ClassError
}

func retryable(class string, r []string) bool {
	if len(r) == 0 {
		r = defaultRetryOn
	}
	return slices.Contains(r, class)
}

// NodeError is a node's failure, addressed by the path of the node where
// it happened. An enclosing loop, map or call passes it on unchanged.
type NodeError struct {
	Path  string
	Class string
	Err   error
}

func (e *NodeError) Error() string {
	return fmt.Sprintf("node %q: %v", e.Path, e.Err)
}

func (e *NodeError) Unwrap() error { return e.Err }

// StopError ends a run cleanly: a limit was reached or the run was
// cancelled. It is never retried or routed by on_error.
type StopError struct{ Reason string }

func (e *StopError) Error() string { return "stopped: " + e.Reason }
