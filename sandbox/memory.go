package sandbox

import (
	"errors"

	"github.com/tetratelabs/wazero/experimental"
)

// guestMemory hands a run's linear memory to wazero and enforces the run's
// memory limit itself: the wazero runtime allows what wasm32 addresses, and
// a growth past limit fails here, where the host sees it. A refused growth
// is what makes a run's end memory_limit; the guest saying so (a
// MemoryError, "fatal error: out of memory" on stderr) is not enough.
//
// With an image, the memory starts as the image's (a snapshot, see
// snapshot.go), its pages counted against limit like any other.
type guestMemory struct {
	limit   uint64
	refused bool
	image   *pythonImage
	mem     *linearMemory // the memory allocated last
}

func (a *guestMemory) Allocate(capacity, max uint64) experimental.LinearMemory {
	most := min(max, a.limit)
	buf := reserve(most)
	if a.image != nil {
		if a.image.size > most {
			// The image alone is over the limit: the module's minimum,
			// its size, is refused, and the run ends memory_limit.
			return &linearMemory{owner: a}
		}
		var err error
		if buf, err = loadImage(buf, most, a.image); err != nil {
			release(buf)
			return &linearMemory{owner: a}
		}
	}
	a.mem = &linearMemory{owner: a, most: most, buf: buf}
	return a.mem
}

// resetToImage puts the image back into every page the guest wrote in a
// memory that starts from the image and has not grown: it then reads as
// the image again.
func (a *guestMemory) resetToImage() error {
	if a.mem == nil || a.image == nil || uint64(len(a.mem.buf)) != a.image.size {
		return errors.New("the memory is not the image's size")
	}
	return restoreWrites(a.mem.buf, a.image.memory)
}

// linearMemory is one guest memory: buf's length is its size, and it may
// grow to most bytes.
type linearMemory struct {
	owner *guestMemory
	most  uint64
	buf   []byte
}

func (m *linearMemory) Reallocate(size uint64) []byte {
	if size > m.most {
		m.owner.refused = true
		return nil
	}
	b, ok := resize(m.buf, size, m.most)
	if !ok {
		m.owner.refused = true
		return nil
	}
	m.buf = b
	return b
}

func (m *linearMemory) Free() {
	release(m.buf)
	m.buf = nil
}
