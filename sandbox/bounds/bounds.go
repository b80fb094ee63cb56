// Package bounds holds the largest limits the code sandbox accepts, which
// neither a pipeline nor a flag can raise: the loader refuses a pipeline
// that asks for more, and the sandbox and its worker processes refuse a
// job that does.
package bounds

const (
	// MaxMemoryMB is the most memory a run may have: a wasm32 guest
	// addresses at most 4 GiB.
	MaxMemoryMB = 4096
	// MaxOutputBytes caps each of a run's stdout, stderr and result, which
	// the host holds in memory.
	MaxOutputBytes = 256 << 20
)
