package promptfoo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// ExistsError says a file Write would write is already there, or a
// symbolic link is in its place.
type ExistsError struct {
	Path    string
	Symlink bool
}

func (e *ExistsError) Error() string {
	if e.Symlink {
		return e.Path + " exists, a symbolic link (nothing is written through one)"
	}
	return e.Path + " exists"
}

// Write writes r's files into dir (created if missing), in name order,
// and returns the paths written. It overwrites nothing and writes through
// no symbolic link: when any of the files exists, even as a dangling
// link, it writes none and returns *ExistsError.
func (r *Result) Write(dir string) ([]string, error) {
	names := make([]string, 0, len(r.Files))
	for name := range r.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		path := filepath.Join(dir, name)
		fi, err := os.Lstat(path)
		switch {
		case err == nil:
			return nil, &ExistsError{Path: path, Symlink: fi.Mode()&fs.ModeSymlink != 0}
		case !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("check the output directory: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make the output directory: %w", err)
	}
	// Through an os.Root, with O_EXCL: a file or link put in a name's
	// place since the check above is not followed, nor written over.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open the output directory: %w", err)
	}
	defer root.Close()
	var written []string
	for _, name := range names {
		path := filepath.Join(dir, name)
		if err := create(root, name, r.Files[name]); errors.Is(err, fs.ErrExist) {
			return written, &ExistsError{Path: path}
		} else if err != nil {
			return written, fmt.Errorf("write the converted files: %w", err)
		}
		written = append(written, path)
	}
	return written, nil
}

func create(root *os.Root, name string, content []byte) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(content); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
