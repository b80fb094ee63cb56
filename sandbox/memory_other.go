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

// loadImage copies the image's memory: without mmap there is no sharing.
func loadImage(buf []byte, most uint64, img *pythonImage) ([]byte, error) {
	b, _ := resize(buf, img.size, most)
	if _, err := img.file.ReadAt(b, imageHeaderSize); err != nil {
		return buf, err
	}
	return b, nil
}
