//go:build unix

package sandbox

import "syscall"

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
