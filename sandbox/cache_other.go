//go:build !linux

package sandbox

import (
	"io/fs"
	"time"
)

// lastUse is the modification time where the access time is not read.
func lastUse(info fs.FileInfo) time.Time { return info.ModTime() }
