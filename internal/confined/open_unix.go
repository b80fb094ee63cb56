//go:build unix

package confined

import (
	"os"
	"syscall"
)

const openFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY
