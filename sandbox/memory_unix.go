//go:build unix

package sandbox

import (
	"fmt"
	"io"
	"os"
	"sync"
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
// guest's writes copy the pages they touch and never reach the copy, and
// the pages it only reads are shared with every other call in the worker.
func loadImage(buf []byte, most uint64, img *pythonImage) ([]byte, error) {
	if cap(buf) == 0 {
		return buf, syscall.ENOMEM
	}
	_, err := unix.MmapPtr(int(img.memory.f.Fd()), 0, unsafe.Pointer(unsafe.SliceData(buf[:1])), uintptr(img.size),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED)
	if err != nil {
		return buf, err
	}
	return buf[:img.size], nil
}

// imageCopy is a worker's own copy of an image's memory, in a file that
// only this process can reach and, where the system can seal one (Linux),
// that nobody can change: calls map it, and the image file may change
// or go after it was checked.
type imageCopy struct {
	f *os.File
	// pristine is the copy mapped read-only and shared, for putting back
	// the pages a call wrote (restoreWrites); mapped at its first use.
	once     sync.Once
	pristine []byte
	err      error
}

// newImageCopy copies size bytes of r into a new imageCopy and seals it.
func newImageCopy(r io.Reader, size uint64) (*imageCopy, error) {
	f, err := privateImageFile()
	if err != nil {
		return nil, err
	}
	if _, err := io.CopyN(f, r, int64(size)); err != nil {
		f.Close()
		return nil, err
	}
	if err := sealImageFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("sealing the copy: %w", err)
	}
	return &imageCopy{f: f}, nil
}

func (c *imageCopy) ReadAt(p []byte, off int64) (int, error) { return c.f.ReadAt(p, off) }

// view is the copy's bytes, mapped read-only.
func (c *imageCopy) view() ([]byte, error) {
	c.once.Do(func() {
		st, err := c.f.Stat()
		if err != nil {
			c.err = err
			return
		}
		c.pristine, c.err = unix.Mmap(int(c.f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	})
	return c.pristine, c.err
}

func (c *imageCopy) Close() error {
	if c.pristine != nil {
		_ = unix.Munmap(c.pristine)
	}
	return c.f.Close()
}
