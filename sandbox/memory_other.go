//go:build !unix

package sandbox

import (
	"bytes"
	"errors"
	"io"
)

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
	copy(b, img.memory.b)
	return b, nil
}

// imageCopy is a worker's own copy of an image's memory, in its heap:
// the image file may change or go after it was checked.
type imageCopy struct{ b []byte }

func newImageCopy(r io.Reader, size uint64) (*imageCopy, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		return nil, err
	}
	return &imageCopy{b: b}, nil
}

func (c *imageCopy) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(c.b).ReadAt(p, off)
}

func (c *imageCopy) Close() error { return nil }
