//go:build unix

package sandbox

import (
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// mmapAllocator backs each linear memory with one anonymous mapping of its
// maximum size, reserved but not committed: growing it commits pages in
// place. wazero's default allocator copies the whole memory on every
// growth, which made a guest growing to 1 GiB take seconds and several GB.
type mmapAllocator struct{}

func (mmapAllocator) Allocate(capacity, max uint64) experimental.LinearMemory {
	b, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return nil
	}
	return &mmapMemory{buf: b}
}

type mmapMemory struct{ buf []byte }

func (m *mmapMemory) Reallocate(size uint64) []byte {
	if size > uint64(len(m.buf)) {
		return nil
	}
	return m.buf[:size]
}

func (m *mmapMemory) Free() {
	if m.buf != nil {
		_ = syscall.Munmap(m.buf)
		m.buf = nil
	}
}
