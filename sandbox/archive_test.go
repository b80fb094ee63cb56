package sandbox

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// exportTo exports the installation in dir and returns the archive's bytes,
// checking that the sha256 returned is the archive's.
func exportTo(t *testing.T, dir string) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	sum, err := ExportPython(dir, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := sha256.Sum256(buf.Bytes()); hex.EncodeToString(got[:]) != sum {
		t.Fatalf("ExportPython returned sha256 %s, the archive's is %x", sum, got)
	}
	return buf.Bytes(), sum
}

// tarHeaders lists the entries of a gzipped tar, with VERSION's text.
func tarHeaders(t *testing.T, b []byte) ([]*tar.Header, string) {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var hs []*tar.Header
	version := ""
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hs, version
		}
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		if strings.HasSuffix(h.Name, "/VERSION") {
			v, _ := io.ReadAll(tr)
			version = string(v)
		}
	}
}

func TestHardening12SandboxExportInstall(t *testing.T) {
	t.Run("fake", func(t *testing.T) {
		src := t.TempDir()
		fakePython(t, src, "1\n", PythonVersion)
		// What an installation has that a build does not: the install
		// lines in VERSION, and lib-dynload.
		if err := os.WriteFile(filepath.Join(src, "VERSION"), []byte("version=3.13.5\nsource_sha256=abc\ninstalled_from=/somewhere\ninstall_date=2026-01-01T00:00:00Z\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(src, "lib", "python3.13", "lib-dynload"), 0o755); err != nil {
			t.Fatal(err)
		}
		archive, sum := exportTo(t, src)
		if again, _ := exportTo(t, src); !bytes.Equal(again, archive) {
			t.Fatal("exporting the same directory twice gave different archives")
		}
		hs, version := tarHeaders(t, archive)
		var names []string
		for _, h := range hs {
			names = append(names, h.Name)
			if !h.ModTime.Equal(exportTime) || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
				t.Errorf("%s: time %v, owner %d/%d %q/%q; want the fixed time and no owner", h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname)
			}
		}
		top := ExportTop + "/"
		want := []string{top + "VERSION", top + "lib/", top + "lib/python3.13/", top + "lib/python3.13/encodings/",
			top + "lib/python3.13/encodings/__init__.pyc", top + "lib/python3.13/json/", top + "lib/python3.13/json/decoder.pyc",
			top + "lib/python3.13/lib-dynload/", top + "lib/python3.13/os.pyc", top + "python.wasm"}
		if strings.Join(names, "\n") != strings.Join(want, "\n") {
			t.Errorf("entries:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
		}
		if version != "version=3.13.5\nsource_sha256=abc\n" {
			t.Errorf("VERSION in the archive = %q, want the build's lines only", version)
		}

		// Installed by its sha256, from the file beside it or the flag.
		dir := t.TempDir()
		path := filepath.Join(dir, "py.tar.gz")
		writeArchive(t, path, archive)
		tempCache(t)
		var out bytes.Buffer
		if _, err := InstallPython(context.Background(), InstallOptions{From: path, Stdout: &out}); err != nil {
			t.Fatalf("install: %v\n%s", err, out.String())
		}
		assertInstalled(t, path)
		// The installation exports to the very same archive.
		if again, _ := exportTo(t, PythonDir()); !bytes.Equal(again, archive) {
			t.Error("the installed copy exports to a different archive than its source")
		}

		os.Remove(path + ".sha256")
		tempCache(t)
		if _, err := InstallPython(context.Background(), InstallOptions{From: path, SHA256: strings.ToUpper(sum)}); err != nil {
			t.Fatalf("install with --sha256: %v", err)
		}
		assertInstalled(t, path)
	})

	t.Run("real", func(t *testing.T) {
		needPythonAt(t, realPythonDir)
		archive, sum := exportTo(t, realPythonDir)
		path := filepath.Join(t.TempDir(), "py.tar.gz")
		if err := os.WriteFile(path, archive, 0o644); err != nil {
			t.Fatal(err)
		}
		// The sandbox cache stays the shared one, which already holds
		// this python.wasm compiled: compiling it again under the race
		// detector took minutes.
		shared := sharedCache(t)
		tempCache(t)
		info, err := InstallPython(context.Background(), InstallOptions{From: path, SHA256: sum, CacheDir: shared})
		if err != nil {
			t.Fatal(err)
		}
		if real := PythonStatusAt(realPythonDir); info.StdlibFiles != real.StdlibFiles || info.WasmBytes != real.WasmBytes {
			t.Errorf("installed %d stdlib files and %d bytes of python.wasm, the source has %d and %d",
				info.StdlibFiles, info.WasmBytes, real.StdlibFiles, real.WasmBytes)
		}
	})
}

// assertNothingInstalled checks that a refused install left nothing.
func assertNothingInstalled(t *testing.T) {
	t.Helper()
	if PythonStatus().Installed {
		t.Error("installed all the same")
	}
	if _, err := os.Stat(filepath.Dir(PythonDir())); err == nil {
		assertNoLeftovers(t)
	}
}

func TestHardening12TamperedArchiveRefused(t *testing.T) {
	src := t.TempDir()
	fakePython(t, src, "1\n", PythonVersion)
	_, goodSum := exportTo(t, src)
	// A different archive that would install fine by its own checksum.
	if err := os.WriteFile(filepath.Join(src, "lib", "python3.13", "evil.pyc"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	altered, alteredSum := exportTo(t, src)
	if goodSum == alteredSum {
		t.Fatal("the two archives have the same sha256")
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "py.tar.gz")
	writeArchive(t, path, altered)
	tempCache(t)
	if _, err := InstallPython(context.Background(), InstallOptions{From: path, SHA256: alteredSum}); err != nil {
		t.Fatalf("the altered archive does not install by its own checksum, so this test proves nothing: %v", err)
	}

	cases := []struct {
		name    string
		sidecar string // "" for none
		flag    string
		want    string
	}{
		{"sidecar of the original", goodSum + "  py.tar.gz\n", "", "refusing a damaged or altered archive"},
		{"flag of the original", "", goodSum, "but the given sha256 says " + goodSum},
		{"right sidecar, wrong flag", alteredSum + "  py.tar.gz\n", goodSum, "but the given sha256 says"},
		{"no checksum", "", "", "no sha256 to check it by: none was given, and there is no py.tar.gz.sha256"},
		{"not a checksum", "", "abc", `"abc", which is not a sha256`},
		{"empty sidecar", "\n", "", "py.tar.gz.sha256 is empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tempCache(t)
			os.Remove(path + ".sha256")
			if c.sidecar != "" {
				if err := os.WriteFile(path+".sha256", []byte(c.sidecar), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := InstallPython(context.Background(), InstallOptions{From: path, SHA256: c.flag})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to say %q", err, c.want)
			}
			assertNothingInstalled(t)
		})
	}
}

// rawTarGz builds a gzipped tar from headers as given (bodies for regular
// files are their names), without the checks a tar.Writer user would add.
func rawTarGz(t *testing.T, hs ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range fakeTarFiles("1\n") {
		tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))})
		tw.Write([]byte(body))
	}
	for _, h := range hs {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg && h.Size == int64(len(h.Name)) {
			tw.Write([]byte(h.Name))
		}
	}
	tw.Flush()
	gz.Close()
	return buf.Bytes()
}

func TestHardening12TraversalArchiveRefused(t *testing.T) {
	file := func(name string) *tar.Header {
		return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(name))}
	}
	link := func(name, to string, kind byte) *tar.Header {
		return &tar.Header{Name: name, Typeflag: kind, Linkname: to, Mode: 0o777}
	}
	cases := []struct {
		name    string
		entries []*tar.Header
		want    string
	}{
		{"dot-dot", []*tar.Header{file("../evil")}, "leaves the archive"},
		{"deep dot-dot", []*tar.Header{file("lib/../../../../evil")}, "leaves the archive"},
		{"absolute", []*tar.Header{file("/tmp/evil")}, "leaves the archive"},
		{"backslashes", []*tar.Header{file(`..\..\..\evil`)}, "not a portable file name"},
		{"drive letter", []*tar.Header{file("C:evil")}, "not a portable file name"},
		{"symlink out", []*tar.Header{link("lib/python3.13/passwd.pyc", "/etc/passwd", tar.TypeSymlink)}, "is a link or special file"},
		{"symlinked dir then a file through it", []*tar.Header{link("up", "../../../..", tar.TypeSymlink), file("up/evil")}, "is a link or special file"},
		{"hard link", []*tar.Header{link("lib/python3.13/h.pyc", "/etc/passwd", tar.TypeLink)}, "is a link or special file"},
		{"device", []*tar.Header{{Name: "dev", Typeflag: tar.TypeChar, Mode: 0o666}}, "is a link or special file"},
		{"too big", []*tar.Header{{Name: "big.pyc", Typeflag: tar.TypeReg, Mode: 0o644, Size: maxArchiveBytes + 1}}, "unpacks to more than 1024 MiB"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cache := tempCache(t)
			dir := t.TempDir()
			path := filepath.Join(dir, "py.tar.gz")
			writeArchive(t, path, rawTarGz(t, c.entries...))
			_, err := InstallPython(context.Background(), InstallOptions{From: path})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to say %q", err, c.want)
			}
			assertNothingInstalled(t)
			for _, d := range []string{dir, cache, filepath.Join(cache, "flowrun"), filepath.Dir(PythonDir())} {
				if _, err := os.Lstat(filepath.Join(d, "evil")); err == nil {
					t.Errorf("wrote %s", filepath.Join(d, "evil"))
				}
			}
		})
	}

	t.Run("too many entries", func(t *testing.T) {
		tempCache(t)
		hs := make([]*tar.Header, maxArchiveEntries)
		for i := range hs {
			hs[i] = &tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755}
		}
		path := filepath.Join(t.TempDir(), "py.tar.gz")
		writeArchive(t, path, rawTarGz(t, hs...))
		_, err := InstallPython(context.Background(), InstallOptions{From: path})
		if err == nil || !strings.Contains(err.Error(), "more than 50000 entries") {
			t.Fatalf("err = %v, want a refusal", err)
		}
		assertNothingInstalled(t)
	})
}

func TestHardening12BuildFromSourceLinuxOnly(t *testing.T) {
	if err := canBuildPython("linux"); err != nil {
		t.Errorf("linux: %v", err)
	}
	for _, goos := range []string{"darwin", "windows"} {
		err := canBuildPython(goos)
		var be *BuildError
		if !errors.As(err, &be) || be.Failed || !strings.Contains(err.Error(), "Linux only, not "+goos) {
			t.Errorf("%s: %v, want a *BuildError saying it builds on Linux only", goos, err)
		}
	}
}
