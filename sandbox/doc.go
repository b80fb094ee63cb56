// Package sandbox runs model-written code in WebAssembly (wazero) with hard
// limits, and is the only package that imports wazero.
//
// Languages: python (real CPython 3.13 built for WASI, installed once by
// `flowrun sandbox install python`), go (compiled to wasip1 by the host
// toolchain, cached by source hash) and wasm (a module the user brings).
//
// Guarantees: every run is a fresh module instance (a Python run's starts
// from a pre-initialised interpreter image, its memory a private
// copy-on-write mapping of the worker's own checked copy, and sees nothing
// of other runs); the guest sees no host files except the read-only Python
// stdlib, no environment, no network and no subprocesses; its clock is
// fixed, and its random source is the host's CSPRNG, its own in every run
// (Python's random module and hash seed are the same in every run). Runs happen in
// worker processes (flowrun re-executing itself), so a guest that spins is
// stopped by killing its worker at the deadline, and whatever a guest does
// to memory stays in a process that is recycled; the host never panics and
// never grows without bound. What the code does (compile error, exception,
// timeout, memory or output limit, a result that is not JSON) is data in the
// Result, not an error; only an unusable sandbox, limits out of range or the
// caller's context ending is an error. The classes that report a limit
// (timeout, memory_limit, output_limit) are decided by the host from what it
// measured, never by what the code reports, and a Go compile is bounded by
// the run's timeout. No worker or compiler outlives flowrun (see
// internal/proc).
package sandbox
