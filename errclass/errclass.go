// Package errclass names the classes of failure that flowrun's parts
// share: a model call, a sandboxed run and a node each fail with exactly
// one Class, a node's retry_on names classes from Retryable, and events,
// checkpoints and the values expressions see carry the class as its text.
package errclass

import "errors"

// Class is the class of a failure.
type Class string

// Failures of a model call or of a node.
const (
	RateLimit     Class = "rate_limit"     // the server asked to slow down
	Server        Class = "server"         // the server failed or answered with a broken body
	Timeout       Class = "timeout"        // a deadline passed
	Connection    Class = "connection"     // the connection failed or was cut
	InvalidOutput Class = "invalid_output" // the model's answer is not what was asked for
	Critical      Class = "critical"       // sending again cannot help: fix the key, model, pipeline or input
	Expression    Class = "expression"     // an expression failed at run time
	LoopExhausted Class = "loop_exhausted" // a loop with on_exhausted: fail reached max_iterations
	Cancelled     Class = "cancelled"      // the run was stopped (Ctrl-C, SIGTERM, Stop in the web UI) during the call
	// ExpressionLimit: an expression used more memory or steps than one
	// evaluation may, or was still running when its node was cancelled.
	ExpressionLimit Class = "expression_limit"
	Internal        Class = "internal" // flowrun itself failed (a panic in a node): a bug, worth reporting
	Other           Class = "error"    // an error that names no class
)

// Failures of code run in the sandbox.
const (
	CompileError       Class = "compile_error"
	RuntimeError       Class = "runtime_error"
	MemoryLimit        Class = "memory_limit"
	OutputLimit        Class = "output_limit"
	BadResult          Class = "bad_result" // the result is not JSON or does not match result_schema
	SandboxUnavailable Class = "sandbox_unavailable"
)

// Retryable lists the classes of failure that may pass when tried again,
// which a node's retry_on may name; a retry: without retry_on retries all
// of them. The pipeline schema's retry_on enum is this list, in this order.
func Retryable() []Class {
	return []Class{RateLimit, Timeout, Server, Connection, InvalidOutput}
}

// Of returns the class of the first error in err's chain that has a
// Class() Class method, or "" when none has.
func Of(err error) Class {
	var c interface{ Class() Class }
	if errors.As(err, &c) {
		return c.Class()
	}
	return ""
}
