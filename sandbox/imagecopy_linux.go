package sandbox

import (
	"os"

	"golang.org/x/sys/unix"
)

// privateImageFile is a memfd: no path leads to it but this process's
// /proc/self/fd, and once sealed nobody can write to it.
func privateImageFile() (*os.File, error) {
	fd, err := unix.MemfdCreate("flowrun-python-image", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "memfd:flowrun-python-image"), nil
}

// sealImageFile forbids any further write to f, growing or shrinking it,
// and removing the seals.
func sealImageFile(f *os.File) error {
	_, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL)
	return err
}
