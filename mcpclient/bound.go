package mcpclient

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync/atomic"
)

// MaxMessageBytes caps one message a server sends, on every transport: a
// line on stdio, one event of an SSE stream, a whole JSON reply over HTTP.
// A server that sends more is cut off, so that no reply can grow flowrun
// without bound.
const MaxMessageBytes = 16 << 20

// MessageTooLargeError is a server cut off for sending a message over the
// cap.
type MessageTooLargeError struct {
	Server string
	Limit  int
}

func (e *MessageTooLargeError) Error() string {
	return fmt.Sprintf("mcp server %s sent a message of more than %d MiB, the cap on one MCP message; flowrun stopped reading it",
		e.Server, e.Limit>>20)
}

// messageBound reads a server's stream and fails once one message passes
// limit bytes. A message ends at a newline (stdio), at a blank line (SSE),
// or only with the stream (a JSON body).
type messageBound struct {
	r        io.ReadCloser
	limit    int
	boundary string // "\n", "\n\n" or "" for none
	tripped  *atomic.Pointer[MessageTooLargeError]
	err      *MessageTooLargeError

	count int
	last  byte // the last byte other than '\r'
}

func (b *messageBound) Read(p []byte) (int, error) {
	if b.tripped.Load() != nil {
		return 0, b.tripped.Load()
	}
	n, err := b.r.Read(p)
	for _, c := range p[:n] {
		b.count++
		if c == '\r' {
			continue
		}
		switch {
		case b.boundary == "\n" && c == '\n',
			b.boundary == "\n\n" && c == '\n' && b.last == '\n':
			b.count = 0
		}
		b.last = c
		if b.count > b.limit {
			b.tripped.CompareAndSwap(nil, b.err)
			return 0, b.err
		}
	}
	return n, err
}

func (b *messageBound) Close() error { return b.r.Close() }

// bound wraps r, a stream from server whose messages end at boundary.
func (c *conn) bound(r io.ReadCloser, server, boundary string) io.ReadCloser {
	return &messageBound{r: r, limit: MaxMessageBytes, boundary: boundary, tripped: &c.tooLarge,
		err: &MessageTooLargeError{Server: server, Limit: MaxMessageBytes}}
}

// boundTransport bounds every reply body of an HTTP server.
type boundTransport struct {
	c      *conn
	server string
	next   http.RoundTripper
}

func (t *boundTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	boundary := ""
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		boundary = "\n\n"
	}
	resp.Body = t.c.bound(resp.Body, t.server, boundary)
	return resp, nil
}
