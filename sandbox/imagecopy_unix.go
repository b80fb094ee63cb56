//go:build unix && !linux

package sandbox

import "os"

// privateImageFile is a temporary file removed at once: no path leads to
// it. (There is no memfd to seal here.)
func privateImageFile() (*os.File, error) {
	f, err := os.CreateTemp("", "flowrun-python-image-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func sealImageFile(*os.File) error { return nil }
