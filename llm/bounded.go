package llm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3/option"

	"github.com/flowrun/flowrun/llmconf"
)

// maxLineBytes bounds one line of a stream, whatever max_reply_bytes
// says: openai-go's stream decoder holds a line whole (it fails past
// 32 MiB), and no honest line comes near it: the longest, a Responses
// stream's last event, repeats the reply's text, under 1 MB.
const maxLineBytes = 16 << 20

// replyLimit bounds every body read from one model's endpoint: a reply
// (a stream in all), an error response, each poll of a background
// response.
type replyLimit struct {
	model string // the model's name in the pipeline, as max_reply_bytes is set on it
	max   int
}

func limitOf(m *llmconf.Model) replyLimit {
	return replyLimit{model: m.Name, max: m.ReplyLimit()}
}

// middleware wraps each response body before openai-go reads it, error
// responses included (openai-go reads those whole too).
func (l replyLimit) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err == nil && res != nil && res.Body != nil {
		b := &boundedBody{body: res.Body, limit: l, maxLine: maxLineBytes}
		if isJSON(res.Header.Get("Content-Type")) {
			// Read whole, not by line: a reply may be one line.
			b.maxLine = l.max
		}
		res.Body = b
	}
	return res, err
}

// isJSON is openai-go's test for a body it decodes whole, without
// parsing the parameters.
func isJSON(contentType string) bool {
	mediaType, _, _ := strings.Cut(contentType, ";")
	mediaType = strings.ToLower(strings.TrimSpace(mediaType))
	return strings.Contains(mediaType, "application/json") || strings.HasSuffix(mediaType, "+json")
}

// boundedBody reads a body until it passes its limit, then fails with a
// replyTooLarge: at most the limit is read, however much is sent.
type boundedBody struct {
	body    io.ReadCloser
	limit   replyLimit
	maxLine int
	read    int // bytes so far
	line    int // bytes since the last newline
	err     *replyTooLarge
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if room := b.limit.max - b.read + 1; len(p) > room {
		p = p[:room] // one byte past the limit is enough to know
	}
	n, err := b.body.Read(p)
	b.read += n
	if i := bytes.LastIndexByte(p[:n], '\n'); i >= 0 {
		b.line = n - 1 - i
	} else {
		b.line += n
	}
	switch {
	case b.read > b.limit.max:
		b.err = &replyTooLarge{limit: b.limit}
	case b.line > b.maxLine:
		b.err = &replyTooLarge{limit: b.limit, line: true}
	default:
		return n, err
	}
	return 0, b.err
}

func (b *boundedBody) Close() error { return b.body.Close() }

// replyTooLarge: a body passed its limit and was cut there.
type replyTooLarge struct {
	limit replyLimit
	line  bool // one line passed maxLineBytes
}

func (e *replyTooLarge) Error() string {
	if e.line {
		return fmt.Sprintf("a line of the reply is longer than %s", mib(maxLineBytes))
	}
	return fmt.Sprintf("the reply is longer than %s", mib(e.limit.max))
}

// message says what was cut and the fix. url is where the reply came from.
func (e *replyTooLarge) message(url string) string {
	const why = "not retried: sending the request again would pay for the reply again"
	if e.line {
		return fmt.Sprintf("the reply of model %q from %s has a line longer than %s, which no model's reply has (max_reply_bytes does not raise it); %s; check the server",
			e.limit.model, url, mib(maxLineBytes), why)
	}
	return fmt.Sprintf("the reply of model %q from %s is longer than %s (max_reply_bytes); %s; if its replies are really this long, raise max_reply_bytes on model %q",
		e.limit.model, url, mib(e.limit.max), why, e.limit.model)
}

// cutReply reports whether err is a reply cut at its limit.
func cutReply(err error) bool {
	var big *replyTooLarge
	return errors.As(err, &big)
}

// mib shows a byte count in MiB when it is whole MiB, else in bytes.
func mib(n int) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
