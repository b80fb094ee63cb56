package llm

import (
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// ImageURL turns an image reference into what a Message carries: an
// http(s) or data URL passes through; anything else is a file path
// (relative to dir) read into a base64 data URL whose MIME type comes from
// the extension, else from the content.
func ImageURL(ref, dir string) (string, error) {
	lower := strings.ToLower(ref)
	if strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") || strings.HasPrefix(lower, "data:") {
		return ref, nil
	}
	path := ref
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("image: %w", err)
	}
	typ := mime.TypeByExtension(strings.ToLower(filepath.Ext(path)))
	if typ == "" || !strings.HasPrefix(typ, "image/") {
		typ = http.DetectContentType(b)
	}
	typ, _, _ = strings.Cut(typ, ";")
	if !strings.HasPrefix(typ, "image/") {
		return "", fmt.Errorf("image %s: not an image (%s)", ref, typ)
	}
	return "data:" + typ + ";base64," + base64.StdEncoding.EncodeToString(b), nil
}
