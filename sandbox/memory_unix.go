//go:build unix

package sandbox

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reserve maps most bytes of address space, reserved but not committed:
// growing commits pages in place. wazero's default allocator copies the
// whole memory on every growth, which made a guest growing to 1 GiB take
// seconds and several GB. A failed mapping leaves nothing to grow into.
func reserve(most uint64) []byte {
	if most == 0 {
		return nil
	}
	b, err := syscall.Mmap(-1, 0, int(most), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return nil
	}
	return b[:0]
}

func resize(b []byte, size, _ uint64) ([]byte, bool) {
	if size > uint64(cap(b)) {
		return nil, false
	}
	return b[:size], true
}

func release(b []byte) {
	if cap(b) > 0 {
		_ = syscall.Munmap(b[:cap(b)])
	}
}

// loadImage maps the image's memory over the start of buf, privately: the
// guest's writes copy the pages they touch and never reach the file, and
// the pages it only reads are shared with every other call.
func loadImage(buf []byte, most uint64, img *pythonImage) ([]byte, error) {
	if cap(buf) == 0 {
		return buf, syscall.ENOMEM
	}
	_, err := unix.MmapPtr(int(img.file.Fd()), imageHeaderSize, unsafe.Pointer(unsafe.SliceData(buf[:1])), uintptr(img.size),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED)
	if err != nil {
		return buf, err
	}
	return buf[:img.size], nil
}
