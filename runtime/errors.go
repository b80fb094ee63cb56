package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/flowrun/flowrun/errclass"
)

// defaultRetryOn is what a retry: block without retry_on retries.
var defaultRetryOn = errclass.Retryable()

// classedError is an error of a class the runtime chose (Errorf).
type classedError struct {
	class errclass.Class
	err   error
}

func (e *classedError) Error() string         { return e.err.Error() }
func (e *classedError) Unwrap() error         { return e.err }
func (e *classedError) Class() errclass.Class { return e.class }

// Errorf returns an error of the given class. An executor's error chooses
// its class with a Class() errclass.Class method; any other is class
// "error" (errclass.Other), which is not retried.
func Errorf(class errclass.Class, format string, args ...any) error {
	return &classedError{class: class, err: fmt.Errorf(format, args...)}
}

// ClassOf returns an error's class: the one it names, timeout for a
// deadline, else errclass.Other.
func ClassOf(err error) errclass.Class {
	if c := errclass.Of(err); c != "" {
		return c
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return errclass.Timeout
	}
	return errclass.Other
}

func retryable(class errclass.Class, r []errclass.Class) bool {
	if len(r) == 0 {
		r = defaultRetryOn
	}
	return slices.Contains(r, class)
}

// PanicError is a panic in a node's executor, recovered into the node's
// failure: the process and the run's other nodes go on. Stack is for the
// node_failed event's detail; the message says only what panicked.
type PanicError struct {
	Value any
	Stack string
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("internal error: %v (a bug in flowrun; the stack is in this node's node_failed event)", e.Value)
}

// Class is errclass.Internal.
func (e *PanicError) Class() errclass.Class { return errclass.Internal }

// NodeError is a node's failure, addressed by the path of the node where
// it happened. An enclosing loop, map or call passes it on unchanged.
type NodeError struct {
	Path  string
	Class errclass.Class
	Err   error
}

func (e *NodeError) Error() string {
	return fmt.Sprintf("node %q: %v", e.Path, e.Err)
}

func (e *NodeError) Unwrap() error { return e.Err }

// StopError ends a run cleanly: a limit was reached or the run was
// cancelled. It is never retried or routed by on_error.
type StopError struct {
	Reason string
	// Limit names the pipeline's limit that was reached
	// ("limits.max_steps"); empty when the run stopped for another reason.
	Limit string
	cause error // a cost cap's refusal, whose reason is told as the run ends
}

func (e *StopError) Unwrap() error { return e.cause }

func (e *StopError) Error() string { return "stopped: " + e.Reason }
