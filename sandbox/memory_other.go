//go:build !unix

package sandbox

// Without mmap a guest memory is a Go slice that grows by copying,
// doubling (up to its most) to keep copies rare.
func reserve(uint64) []byte { return nil }

func resize(b []byte, size, most uint64) ([]byte, bool) {
	if size <= uint64(cap(b)) {
		return b[:size], true
	}
	nb := make([]byte, size, min(most, max(size, 2*uint64(cap(b)))))
	copy(nb, b)
	return nb, true
}

func release([]byte) {}
