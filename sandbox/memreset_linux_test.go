package sandbox

import (
	"bytes"
	"math/rand/v2"
	"os"
	"testing"
)

// TestRestoreWritesPutsBackTheImage: after writes to scattered pages and
// a run of pages of a memory mapped from an image, restoreWrites makes it
// read as the image again, byte for byte, and leaves the pages it put
// back mapped, so the next call's writes to them take no fault.
func TestRestoreWritesPutsBackTheImage(t *testing.T) {
	ps := os.Getpagesize()
	const pages = 64
	image := make([]byte, pages*ps)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range image {
		image[i] = byte(rng.Uint32())
	}
	c, err := newImageCopy(bytes.NewReader(image), uint64(len(image)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	img := &pythonImage{memory: c, size: uint64(len(image))}
	mem := (&guestMemory{limit: 1 << 30, image: img}).Allocate(uint64(len(image)), 1<<30).(*linearMemory)
	defer mem.Free()
	buf := mem.buf
	if !bytes.Equal(buf, image) {
		t.Fatal("the memory does not start as the image")
	}
	written := []int{0, 3, 17, 18, 19, 20, 63}
	for round := range 3 {
		for _, p := range written {
			buf[p*ps+round] ^= 0xff
		}
		_ = buf[40*ps] // read only: stays the image's page
		if err := restoreWrites(buf, c); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, image) {
			t.Fatalf("round %d: the memory differs from the image after restoreWrites", round)
		}
	}
	pagemap.mu.Lock()
	entries, err := pageEntries(buf)
	if err != nil {
		pagemap.mu.Unlock()
		t.Skip(err)
	}
	for _, p := range written {
		if entries[p]&pmPresent == 0 {
			t.Errorf("page %d was put back but is no longer mapped: the next write to it faults", p)
		}
	}
	if entries[40]&pmFile == 0 {
		t.Error("page 40, only read, is no longer the image's page")
	}
	pagemap.mu.Unlock()
}
