//go:build !unix

package sandbox

import "os"

// jobInput is the worker's stdin.
func jobInput() *os.File { return os.Stdin }
