package sandbox

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportWritesArchiveAndChecksum: Export writes the same archive as
// ExportPython, its sha256 beside it as sha256sum prints it, and leaves
// an earlier archive whole when exporting fails.
func TestExportWritesArchiveAndChecksum(t *testing.T) {
	src := t.TempDir()
	fakePython(t, src, "1\n", PythonVersion)
	want, wantSum := exportTo(t, src)
	path := filepath.Join(t.TempDir(), "python.tar.gz")
	sum, size, err := Export(src, path)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	line, _ := os.ReadFile(path + ".sha256")
	if sum != wantSum || size != int64(len(want)) || !bytes.Equal(got, want) || string(line) != wantSum+"  python.tar.gz\n" {
		t.Fatalf("sum %s size %d, checksum file %q; want %s, %d bytes", sum, size, line, wantSum, len(want))
	}
	if _, _, err := Export(filepath.Join(t.TempDir(), "none"), path); err == nil {
		t.Fatal("exporting a directory with no installation succeeded")
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, want) {
		t.Error("a failed export changed the earlier archive")
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".python.tar.gz.tmp-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestGoToolchain: the go command these tests run under is found, with
// its version.
func TestGoToolchain(t *testing.T) {
	path, version := GoToolchain(context.Background())
	if path == "" || !strings.HasPrefix(version, "go1") {
		t.Fatalf("path %q version %q", path, version)
	}
	t.Setenv("PATH", t.TempDir())
	if path, version := GoToolchain(context.Background()); path != "" || version != "" {
		t.Errorf("no go on PATH: %q %q", path, version)
	}
}
