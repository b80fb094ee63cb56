package promptfoo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// ExistsError says a file Write would write is already there.
type ExistsError struct{ Path string }

func (e *ExistsError) Error() string { return e.Path + " exists" }

// Write writes r's files into dir (created if missing), in name order,
// and returns the paths written. It overwrites nothing: when any of the
// files exists it writes none and returns *ExistsError.
func (r *Result) Write(dir string) ([]string, error) {
	names := make([]string, 0, len(r.Files))
	for name := range r.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, fs.ErrNotExist) {
			return nil, &ExistsError{Path: filepath.Join(dir, name)}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make the output directory: %w", err)
	}
	var written []string
	for _, name := range names {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, r.Files[name], 0o644); err != nil {
			return written, fmt.Errorf("write the converted files: %w", err)
		}
		written = append(written, path)
	}
	return written, nil
}
