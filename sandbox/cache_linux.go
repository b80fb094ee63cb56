package sandbox

import (
	"io/fs"
	"syscall"
	"time"
)

// lastUse is the later of a file's modification and access times.
func lastUse(info fs.FileInfo) time.Time {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return info.ModTime()
	}
	if atime := time.Unix(st.Atim.Unix()); atime.After(info.ModTime()) {
		return atime
	}
	return info.ModTime()
}
