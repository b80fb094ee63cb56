// Package confined reads the files a pipeline names, inside a directory
// they cannot leave.
//
// Guarantees:
//   - The check that a name stays inside the directory and the open are one
//     operation (os.Root): no symbolic link or rename made between them can
//     lead outside.
//   - Every name that leads outside (through "..", an absolute path or a
//     symbolic link) gets the same error, ErrOutside, whether or not a file
//     exists there; nothing outside is looked at.
//   - Only regular files are read. A named pipe, device or directory is
//     refused without blocking.
//   - At most Dir.MaxBytes are read, and a cancelled context stops a read.
package confined

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// ErrOutside is the error for every name that leads outside the directory.
var ErrOutside = errors.New("path escapes the pipeline directory")

// ErrTooLarge is wrapped by the error for a file over the size cap.
var ErrTooLarge = errors.New("file too large")

// ErrNotRegular is wrapped by the error for a directory, named pipe,
// device or socket.
var ErrNotRegular = errors.New("not a regular file")

// Dir is a directory that names are resolved in and cannot leave.
type Dir struct {
	Root     string // absolute; nothing outside it is opened
	Base     string // where relative names start, relative to Root; "" is Root
	MaxBytes int64  // the most a read returns
	Limit    string // the setting that raises MaxBytes, named when a file is over it
}

// ReadFile reads the whole file; a file over MaxBytes is an error wrapping
// ErrTooLarge, found before reading when the file's size says so.
func (d Dir) ReadFile(ctx context.Context, name string) ([]byte, error) {
	f, size, err := d.open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size > d.MaxBytes {
		return nil, d.tooLarge(size)
	}
	b, more, err := readAtMost(ctx, f, d.MaxBytes, size)
	if err != nil {
		return nil, err
	}
	if more { // it grew since it was opened
		return nil, d.tooLarge(-1)
	}
	return b, nil
}

// ReadHead reads at most MaxBytes of the file. size is the whole file's
// size; head is shorter than size when the file is over the cap.
func (d Dir) ReadHead(ctx context.Context, name string) (head []byte, size int64, err error) {
	f, size, err := d.open(name)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	b, more, err := readAtMost(ctx, f, d.MaxBytes, size)
	if err != nil {
		return nil, 0, err
	}
	switch {
	case !more:
		size = int64(len(b))
	case size <= int64(len(b)):
		size = int64(len(b)) + 1 // it grew since it was opened
	}
	return b, size, nil
}

// Check opens the file and closes it: it is inside, regular and within
// MaxBytes.
func (d Dir) Check(name string) error {
	f, size, err := d.open(name)
	if err != nil {
		return err
	}
	f.Close()
	if size > d.MaxBytes {
		return d.tooLarge(size)
	}
	return nil
}

// open opens name for reading if it is a regular file inside the
// directory, returning its size.
func (d Dir) open(name string) (*os.File, int64, error) {
	if name == "" {
		return nil, 0, errors.New("the path is empty")
	}
	var rel string
	if filepath.IsAbs(name) {
		r, err := filepath.Rel(d.Root, name)
		if err != nil {
			return nil, 0, ErrOutside
		}
		rel = r
	} else {
		rel = filepath.Join(d.Base, name)
	}
	if !filepath.IsLocal(rel) {
		return nil, 0, ErrOutside
	}
	root, err := os.OpenRoot(d.Root)
	if err != nil {
		return nil, 0, fmt.Errorf("opening the pipeline directory: %w", err)
	}
	defer root.Close()
	// Non-blocking, so that opening a named pipe with no writer returns at
	// once; it is refused below.
	f, err := root.OpenFile(rel, openFlags, 0)
	if err != nil {
		return nil, 0, openError(err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%w (%s)", ErrNotRegular, kind(fi.Mode()))
	}
	return f, fi.Size(), nil
}

// escapeMessage is os.Root's text for a name that resolves outside it; the
// error value itself is not exported.
const escapeMessage = "path escapes from parent"

// notFound is the error for a name inside the directory with no file.
type notFound struct{}

func (notFound) Error() string { return "no such file in the pipeline directory" }
func (notFound) Unwrap() error { return fs.ErrNotExist }

func openError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	switch {
	case err.Error() == escapeMessage:
		return ErrOutside
	case errors.Is(err, fs.ErrNotExist):
		return notFound{}
	}
	return err
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return m.Type().String()
}

func (d Dir) tooLarge(size int64) error {
	what := "the file is"
	if size >= 0 {
		what = fmt.Sprintf("the file holds %s,", bytesText(size))
	}
	hint := ""
	if d.Limit != "" {
		hint = "; raise " + d.Limit + " to read it"
	}
	return fmt.Errorf("%w: %s over the %s cap%s", ErrTooLarge, what, bytesText(d.MaxBytes), hint)
}

func bytesText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// chunk is how much is read between two looks at the context.
const chunk = 64 << 10

// readAtMost reads up to max bytes of r, which holds about hint; more says
// r held more.
func readAtMost(ctx context.Context, r io.Reader, max, hint int64) (b []byte, more bool, err error) {
	b = make([]byte, 0, min(hint, max)+1)
	for {
		if err := ctx.Err(); err != nil {
			return nil, false, fmt.Errorf("reading stopped: %w", context.Cause(ctx))
		}
		if int64(len(b)) > max {
			return b[:max], true, nil
		}
		want := int(min(chunk, max+1-int64(len(b))))
		b = slices.Grow(b, want)
		n, err := io.ReadFull(r, b[len(b):len(b)+want])
		b = b[:len(b)+n]
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return b, false, nil
		case err != nil:
			return nil, false, err
		}
	}
}
