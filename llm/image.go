package llm

import (
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/flowrun/flowrun/llmconf"
)

// ImageURL turns an image reference into what a Message carries: an
// http(s) or data URL passes through; anything else names a file, whose
// bytes read returns, sent as a base64 data URL whose MIME type comes from
// the extension, else from the content.
func ImageURL(ref string, read func(name string) ([]byte, error)) (string, error) {
	if llmconf.IsImageURL(ref) {
		return ref, nil
	}
	b, err := read(ref)
	if err != nil {
		return "", fmt.Errorf("image %q: %w", ref, err)
	}
	typ := mime.TypeByExtension(strings.ToLower(filepath.Ext(ref)))
	if typ == "" || !strings.HasPrefix(typ, "image/") {
		typ = http.DetectContentType(b)
	}
	typ, _, _ = strings.Cut(typ, ";")
	if !strings.HasPrefix(typ, "image/") {
		return "", fmt.Errorf("image %s: not an image (%s)", ref, typ)
	}
	return "data:" + typ + ";base64," + base64.StdEncoding.EncodeToString(b), nil
}
