package sandbox

import (
	"unsafe"

	"github.com/tetratelabs/wazero/experimental"
	"golang.org/x/sys/windows"
)

// mmapAllocator reserves each linear memory's maximum size of address
// space and commits pages as the memory grows, in place, as on Unix.
type mmapAllocator struct{}

func (mmapAllocator) Allocate(capacity, max uint64) experimental.LinearMemory {
	addr, err := windows.VirtualAlloc(0, uintptr(max), windows.MEM_RESERVE, windows.PAGE_NOACCESS)
	if err != nil {
		return nil
	}
	return &reservedMemory{addr: addr, max: max}
}

type reservedMemory struct {
	addr           uintptr
	max, committed uint64
}

func (m *reservedMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if size > m.committed {
		if _, err := windows.VirtualAlloc(m.addr, uintptr(size), windows.MEM_COMMIT, windows.PAGE_READWRITE); err != nil {
			return nil
		}
		m.committed = size
	}
	// The reservation is outside the Go heap and stays put until Free.
	return unsafe.Slice((*byte)(unsafe.Add(nil, m.addr)), size)
}

func (m *reservedMemory) Free() {
	if m.addr != 0 {
		_ = windows.VirtualFree(m.addr, 0, windows.MEM_RELEASE)
		m.addr = 0
	}
}
