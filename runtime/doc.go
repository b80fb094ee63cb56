// Package runtime executes a compiled pipeline.
//
// It owns the scheduler (block order, next jumps, break and continue),
// scopes and state, per-node policies (when, set, retry, on_error, timeout),
// run limits and events. It knows what a node kind does only through the
// Registry: every kind, control flow included, is an Executor registered by
// package nodes. Given the same model answers, a run is deterministic: map
// results keep input order and parallel state writes apply in declaration
// order.
//
// A node that starts an effect running elsewhere (a background model
// response) records it with Scope.RecordInFlight through the same
// Checkpointer as finished nodes, durably; a resume gives the record back
// to the node run again (Scope.InFlight), which re-attaches to the effect
// instead of starting it again.
package runtime
