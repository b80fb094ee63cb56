package promptfoo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/flowrun/flowrun/internal/confined"
)

// maxFileSize is the most the importer reads of one file, the
// configuration or a prompt file: they are text, and a larger one is a
// mistake (or a device) that would otherwise fill memory.
const maxFileSize = 8 << 20

// readConfig reads the configuration at path, a regular file of at most
// maxFileSize bytes. It may be a symbolic link: the user named it.
func readConfig(ctx context.Context, path string) ([]byte, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(real)
	if err != nil {
		return nil, err
	}
	return confined.Dir{Root: filepath.Dir(abs), MaxBytes: maxFileSize}.ReadFile(ctx, filepath.Base(abs))
}

// readPromptFile reads the file a prompt names from dir, the
// configuration's directory: a regular file of at most maxFileSize bytes
// inside root (dir, unless the user named a directory that holds it).
func readPromptFile(ctx context.Context, root, dir, name string) ([]byte, error) {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	from, err := filepath.Rel(absRoot, absDir)
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(name) {
		name = filepath.Join(from, name)
	}
	b, err := confined.Dir{Root: absRoot, MaxBytes: maxFileSize}.ReadFile(ctx, name)
	switch {
	case errors.Is(err, confined.ErrOutside) && root == dir:
		return nil, fmt.Errorf("it is outside the configuration's directory %s; copy it into that directory and name it from there, or let the import read from a directory that holds both (--root)", dir)
	case errors.Is(err, confined.ErrOutside):
		return nil, fmt.Errorf("it is outside %s, the directory the import reads from", root)
	case errors.Is(err, fs.ErrNotExist):
		return nil, missingError{dir: dir}
	}
	return b, err
}

// missingError says a file named is not in the configuration's directory;
// it is an fs.ErrNotExist, so that a name without file:// that names no
// file can be taken as text.
type missingError struct{ dir string }

func (e missingError) Error() string {
	return "no such file in the configuration's directory " + e.dir
}

func (e missingError) Unwrap() error { return fs.ErrNotExist }
