package sandbox

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// restoreWrites puts the image's bytes back into every page of buf, a
// private mapping of img, that is no longer the image's own page: the
// pages the guest wrote, each of which the kernel copied for it. Those are
// copied over from the image, not dropped (MADV_DONTNEED), so they stay
// mapped and writable: the next call writes them without a fault, and a
// copy-on-write fault (a trap, a new page, the copy) costs several times
// the copy. /proc/self/pagemap tells which pages those are; without it the
// pages are dropped, as the image then maps them again.
func restoreWrites(buf []byte, img *imageCopy) error {
	pristine, err := img.view()
	if err != nil || len(pristine) < len(buf) {
		return unix.Madvise(buf, unix.MADV_DONTNEED)
	}
	pagemap.mu.Lock()
	defer pagemap.mu.Unlock()
	entries, err := pageEntries(buf)
	if err != nil {
		return unix.Madvise(buf, unix.MADV_DONTNEED)
	}
	ps := os.Getpagesize()
	for i := 0; i < len(entries); {
		if !written(entries[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(entries) && written(entries[j]) {
			j++
		}
		copy(buf[i*ps:j*ps], pristine[i*ps:j*ps])
		i = j
	}
	return nil
}

// The bits of a pagemap entry (Documentation/admin-guide/mm/pagemap.rst).
const (
	pmPresent = 1 << 63
	pmSwapped = 1 << 62
	pmFile    = 1 << 61 // a page of the file (or shared memory), not a private copy
)

// written says whether a page may differ from the image: it is mapped and
// not the file's page (a private copy, or anything else the kernel put
// there), or swapped out, which only a private copy can be. A page not
// mapped reads as the image.
func written(entry uint64) bool {
	return entry&pmSwapped != 0 || entry&pmPresent != 0 && entry&pmFile == 0
}

var pagemap struct {
	once    sync.Once
	f       *os.File
	err     error
	mu      sync.Mutex
	entries []uint64
}

// pageEntries reads buf's pagemap entries, one per page, into a buffer
// that the next reading reuses; the caller holds pagemap.mu.
func pageEntries(buf []byte) ([]uint64, error) {
	pagemap.once.Do(func() { pagemap.f, pagemap.err = os.Open("/proc/self/pagemap") })
	if pagemap.err != nil {
		return nil, pagemap.err
	}
	ps := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	n := (len(buf) + int(ps) - 1) / int(ps)
	if cap(pagemap.entries) < n {
		pagemap.entries = make([]uint64, n)
	}
	entries := pagemap.entries[:n]
	// The entries are in the machine's own byte order.
	raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(entries))), 8*n)
	got, err := pagemap.f.ReadAt(raw, int64(start/ps*8))
	if got != len(raw) {
		return nil, fmt.Errorf("reading /proc/self/pagemap: %d of %d bytes: %v", got, len(raw), err)
	}
	return entries, nil
}
