package sandbox

import (
	"bytes"
	"errors"
)

// errOutputLimit stops a guest that wrote more than it may.
var errOutputLimit = errors.New("output limit reached")

// cappedBuffer keeps at most limit bytes. The write that crosses the limit
// keeps what fits and fails, and the guest is stopped: a flood cannot grow
// the host, and what came before the cap is kept.
type cappedBuffer struct {
	buf     bytes.Buffer
	limit   int
	flooded bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if c.flooded {
		return 0, errOutputLimit
	}
	room := c.limit - c.buf.Len()
	if len(p) <= room {
		return c.buf.Write(p)
	}
	c.buf.Write(p[:max(room, 0)])
	c.flooded = true
	// Panicking inside the host's fd_write ends the guest's execution at
	// once; wazero turns it into an error returned from instantiation.
	panic(errOutputLimit)
}

// headWriter keeps the first limit bytes written to it and discards the
// rest without failing the writer.
type headWriter struct {
	buf   bytes.Buffer
	limit int
}

func (h *headWriter) Write(p []byte) (int, error) {
	if room := h.limit - h.buf.Len(); room > 0 {
		h.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
