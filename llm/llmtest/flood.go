package llmtest

import (
	"net/http"
	"strings"
)

// ChatPrefix opens a chat completion whose text is what follows it: with
// Flood, a reply as long as a test asks.
const ChatPrefix = `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"`

// Flood answers 200 with a body of contentType: prefix, then filler
// repeated until size bytes in all have gone or the client hangs up. The
// server writes it as it goes and holds none of it, so that the memory a
// test sees is what the client kept.
func Flood(w http.ResponseWriter, contentType, prefix, filler string, size int) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(http.StatusOK)
	chunk := []byte(strings.Repeat(filler, max(1, 32<<10/len(filler))))
	sent, err := w.Write([]byte(prefix))
	for err == nil && sent < size {
		var n int
		n, err = w.Write(chunk[:min(len(chunk), size-sent)])
		sent += n
	}
}
