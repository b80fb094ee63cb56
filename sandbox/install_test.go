package sandbox

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// realPythonDir is the installation the developer's or CI's machine has,
// read before any test points XDG_CACHE_HOME at a temporary directory.
var realPythonDir = PythonDir()

// uleb encodes n as unsigned LEB128.
func uleb(n int) []byte {
	var b []byte
	for {
		c := byte(n & 0x7f)
		n >>= 7
		if n != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

func wasmSection(id byte, content ...[]byte) []byte {
	body := bytes.Join(content, nil)
	return append(append([]byte{id}, uleb(len(body))...), body...)
}

func wasmName(s string) []byte { return append(uleb(len(s)), s...) }

// wasiPrinter is a tiny WASI command that writes text to stdout, standing
// in for python.wasm where the tests exercise the copying, not CPython.
func wasiPrinter(text string) []byte {
	if len(text) >= 64 {
		panic("text too long for a one-byte i32.const")
	}
	code := []byte{
		0x41, 0x00, 0x41, 0x10, 0x36, 0x02, 0x00, // iov.buf = 16
		0x41, 0x04, 0x41, byte(len(text)), 0x36, 0x02, 0x00, // iov.len
		0x41, 0x01, 0x41, 0x00, 0x41, 0x01, 0x41, 0x08, 0x10, 0x00, 0x1a, // drop(fd_write(1, iov, 1, &n))
		0x0b,
	}
	body := append([]byte{0x00}, code...) // no locals
	return bytes.Join([][]byte{
		{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00},
		wasmSection(1, []byte{0x02, 0x60, 0x04, 0x7f, 0x7f, 0x7f, 0x7f, 0x01, 0x7f, 0x60, 0x00, 0x00}),
		wasmSection(2, []byte{0x01}, wasmName("wasi_snapshot_preview1"), wasmName("fd_write"), []byte{0x00, 0x00}),
		wasmSection(3, []byte{0x01, 0x01}),
		wasmSection(5, []byte{0x01, 0x00, 0x01}),
		wasmSection(7, []byte{0x02}, wasmName("memory"), []byte{0x02, 0x00}, wasmName("_start"), []byte{0x00, 0x01}),
		wasmSection(10, []byte{0x01}, uleb(len(body)), body),
		wasmSection(11, []byte{0x01, 0x00, 0x41, 0x10, 0x0b}, wasmName(text)),
	}, nil)
}

// fakePython lays out a Python directory whose python.wasm prints out.
func fakePython(t *testing.T, dir, out, version string) {
	t.Helper()
	files := map[string]string{
		"python.wasm":                           string(wasiPrinter(out)),
		"lib/python3.13/os.pyc":                 "os",
		"lib/python3.13/encodings/__init__.pyc": "enc",
		"lib/python3.13/json/decoder.pyc":       "json",
	}
	if version != "" {
		files["VERSION"] = fmt.Sprintf("version=%s\nbuild_revision=%d\npackages=python %s, numpy 2.2.4\nsource_sha256=abc\n", version, pythonBuildRevision, version)
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// tempCache points XDG_CACHE_HOME at a new directory.
func tempCache(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", dir)
	return dir
}

func TestPythonDir(t *testing.T) {
	cache := tempCache(t)
	if got, want := PythonDir(), filepath.Join(cache, "flowrun", "python", "3.13.5"); got != want {
		t.Errorf("PythonDir() = %s, want %s", got, want)
	}
	home := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", home)
	if got, want := PythonDir(), filepath.Join(home, ".cache", "flowrun", "python", "3.13.5"); got != want {
		t.Errorf("without XDG_CACHE_HOME, PythonDir() = %s, want %s", got, want)
	}
}

func TestPythonStatusEmptyCache(t *testing.T) {
	tempCache(t)
	info := PythonStatus()
	if info.Installed {
		t.Fatalf("empty cache reports installed: %+v", info)
	}
	if !strings.Contains(info.Problem, "python.wasm") || info.Dir != PythonDir() {
		t.Errorf("status = %+v, want a problem naming python.wasm in %s", info, PythonDir())
	}
	// Only the interpreter, no stdlib.
	fakePython(t, PythonDir(), "1\n", "")
	os.RemoveAll(filepath.Join(PythonDir(), "lib"))
	if info := PythonStatus(); info.Installed || !strings.Contains(info.Problem, "stdlib") {
		t.Errorf("without a stdlib: %+v", info)
	}
}

func TestPythonStatusWrongVersion(t *testing.T) {
	tempCache(t)
	fakePython(t, PythonDir(), "1\n", "3.12.1")
	if info := PythonStatus(); info.Installed || !strings.Contains(info.Problem, "3.12.1") {
		t.Errorf("a 3.12.1 manifest: %+v", info)
	}
}

func assertInstalled(t *testing.T, from string) {
	t.Helper()
	info := PythonStatus()
	if !info.Installed {
		t.Fatalf("not installed: %s", info.Problem)
	}
	if info.StdlibFiles != 3 || info.WasmBytes == 0 {
		t.Errorf("status = %+v, want 3 stdlib files and a python.wasm", info)
	}
	if info.Manifest["version"] != PythonVersion || info.Manifest["source_sha256"] != "abc" || info.Manifest["installed_from"] != from {
		t.Errorf("manifest = %v", info.Manifest)
	}
	b, err := os.ReadFile(filepath.Join(PythonDir(), "lib", "python3.13", "json", "decoder.pyc"))
	if err != nil || string(b) != "json" {
		t.Errorf("json/decoder.pyc = %q, %v", b, err)
	}
	assertNoLeftovers(t)
}

// assertNoLeftovers checks that no temporary directory is left beside the
// installation.
func assertNoLeftovers(t *testing.T) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Dir(PythonDir()))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != PythonVersion {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

func TestInstallFromDir(t *testing.T) {
	tempCache(t)
	src := t.TempDir()
	fakePython(t, src, "1\n", PythonVersion)
	os.WriteFile(filepath.Join(src, "build.log"), []byte("not copied"), 0o644)
	var out bytes.Buffer
	if _, err := InstallPython(context.Background(), InstallOptions{From: src, Stdout: &out}); err != nil {
		t.Fatalf("install: %v\n%s", err, out.String())
	}
	assertInstalled(t, src)
	if _, err := os.Stat(filepath.Join(PythonDir(), "build.log")); err == nil {
		t.Error("copied build.log, which is not part of the layout")
	}

	// Reinstalling from an installation keeps one installed_from line.
	if _, err := InstallPython(context.Background(), InstallOptions{From: PythonDir(), Force: true}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(PythonDir(), "VERSION"))
	if n := strings.Count(string(b), "installed_from="); n != 1 || !strings.Contains(string(b), "source_sha256=abc") {
		t.Errorf("VERSION after a reinstall:\n%s", b)
	}
	assertNoLeftovers(t)

	// Installing again is a no-op that says so.
	out.Reset()
	if _, err := InstallPython(context.Background(), InstallOptions{From: src, Stdout: &out}); err != nil || !strings.Contains(out.String(), "already installed") {
		t.Errorf("second install: %v, %q", err, out.String())
	}
}

func writeTarGz(t *testing.T, path string, files map[string]string, top string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if top != "" {
		tw.WriteHeader(&tar.Header{Name: top + "/", Typeflag: tar.TypeDir, Mode: 0o755})
	}
	for name, body := range files {
		if top != "" {
			name = top + "/" + name
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	writeArchive(t, path, buf.Bytes())
}

// writeArchive writes an archive and, beside it, its sha256 as
// sha256sum prints it.
func writeArchive(t *testing.T, path string, b []byte) {
	t.Helper()
	sum := sha256.Sum256(b)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".sha256", []byte(hex.EncodeToString(sum[:])+"  "+filepath.Base(path)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func fakeTarFiles(out string) map[string]string {
	return map[string]string{
		"python.wasm":                           string(wasiPrinter(out)),
		"VERSION":                               "version=3.13.5\nsource_sha256=abc\n",
		"lib/python3.13/os.pyc":                 "os",
		"lib/python3.13/encodings/__init__.pyc": "enc",
		"lib/python3.13/json/decoder.pyc":       "json",
	}
}

func TestInstallFromTarball(t *testing.T) {
	for _, top := range []string{"", "python-3.13.5-wasi"} {
		t.Run("top="+top, func(t *testing.T) {
			tempCache(t)
			tgz := filepath.Join(t.TempDir(), "python.tar.gz")
			writeTarGz(t, tgz, fakeTarFiles("1\n"), top)
			if _, err := InstallPython(context.Background(), InstallOptions{From: tgz}); err != nil {
				t.Fatal(err)
			}
			assertInstalled(t, tgz)
		})
	}
}

func TestInstallFromBadSources(t *testing.T) {
	tempCache(t)
	empty := t.TempDir()
	if _, err := InstallPython(context.Background(), InstallOptions{From: empty}); err == nil || !strings.Contains(err.Error(), "python.wasm") {
		t.Errorf("empty dir: %v", err)
	}
	noLib := t.TempDir()
	os.WriteFile(filepath.Join(noLib, "python.wasm"), wasiPrinter("1\n"), 0o644)
	if _, err := InstallPython(context.Background(), InstallOptions{From: noLib}); err == nil || !strings.Contains(err.Error(), "lib/python3.13") {
		t.Errorf("no lib: %v", err)
	}
	notTar := filepath.Join(t.TempDir(), "x.tar.gz")
	writeArchive(t, notTar, []byte("hello"))
	if _, err := InstallPython(context.Background(), InstallOptions{From: notTar}); err == nil || !strings.Contains(err.Error(), "not a tarball") {
		t.Errorf("not a tarball: %v", err)
	}
	if _, err := InstallPython(context.Background(), InstallOptions{From: filepath.Join(empty, "missing")}); err == nil {
		t.Error("a missing --from installed")
	}
	if PythonStatus().Installed {
		t.Error("something got installed")
	}
	assertNoLeftovers(t)
}

// A new tree that does not run leaves the old installation in place.
func TestInstallKeepsOldWhenNewFails(t *testing.T) {
	tempCache(t)
	good := t.TempDir()
	fakePython(t, good, "1\n", PythonVersion)
	if _, err := InstallPython(context.Background(), InstallOptions{From: good}); err != nil {
		t.Fatal(err)
	}
	bad := t.TempDir()
	fakePython(t, bad, "2\n", PythonVersion)
	_, err := InstallPython(context.Background(), InstallOptions{From: bad, Force: true})
	if err == nil || !strings.Contains(err.Error(), "does not run") {
		t.Fatalf("err = %v, want a failed check", err)
	}
	if info := PythonStatus(); !info.Installed || info.Manifest["installed_from"] != good {
		t.Errorf("the old installation is gone: %+v", info)
	}
	assertNoLeftovers(t)

	// --force with a good tree replaces it.
	again := t.TempDir()
	fakePython(t, again, "1\n", PythonVersion)
	if _, err := InstallPython(context.Background(), InstallOptions{From: again, Force: true}); err != nil {
		t.Fatal(err)
	}
	if info := PythonStatus(); info.Manifest["installed_from"] != again {
		t.Errorf("--force did not replace: %v", info.Manifest)
	}
	assertNoLeftovers(t)
}

// With the real build in the cache, installing a copy of it runs print(1)
// through CPython under wazero.
func TestInstalledPythonRuns(t *testing.T) {
	needPythonAt(t, realPythonDir)
	if err := VerifyPython(context.Background(), realPythonDir); err != nil {
		t.Fatalf("the installed python does not run print(1): %v", err)
	}
	shared := sharedCache(t) // holds this python.wasm compiled: see TestHardening12SandboxExportInstall
	tempCache(t)
	info, err := InstallPython(context.Background(), InstallOptions{From: realPythonDir, CacheDir: shared})
	if err != nil {
		t.Fatal(err)
	}
	if info.WasmBytes < 1<<20 || info.StdlibFiles < 100 {
		t.Errorf("a copy of the real build looks too small: %+v", info)
	}
}

// An installation an older build script made (no numpy) still runs, but
// is outdated: install replaces it without --force.
func TestInstallReplacesOutdated(t *testing.T) {
	tempCache(t)
	fakePython(t, PythonDir(), "1\n", PythonVersion)
	if err := os.WriteFile(filepath.Join(PythonDir(), "VERSION"), []byte("version="+PythonVersion+"\nsource_sha256=abc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	info := PythonStatus()
	if !info.Installed || !strings.Contains(info.Outdated, "no numpy") || info.HasPackage("numpy") {
		t.Fatalf("a revision 1 installation: %+v", info)
	}
	if want := []Package{{"python", PythonVersion}}; !reflect.DeepEqual(info.Packages, want) {
		t.Errorf("packages %v, want %v", info.Packages, want)
	}
	src := t.TempDir()
	fakePython(t, src, "1\n", PythonVersion)
	var out bytes.Buffer
	if _, err := InstallPython(context.Background(), InstallOptions{From: src, Stdout: &out}); err != nil {
		t.Fatalf("install: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "is outdated") {
		t.Errorf("install output %q does not say why it replaced the installation", out.String())
	}
	info = PythonStatus()
	if info.Outdated != "" || !info.HasPackage("numpy") {
		t.Errorf("after install: %+v", info)
	}
	if want := []Package{{"python", PythonVersion}, {"numpy", "2.2.4"}}; !reflect.DeepEqual(info.Packages, want) {
		t.Errorf("packages %v, want %v", info.Packages, want)
	}
}

// build.sh and install.go agree on the build script's revision.
func TestBuildScriptRevision(t *testing.T) {
	if want := fmt.Sprintf("\nBUILD_REVISION=%d\n", pythonBuildRevision); !bytes.Contains(pythonBuildScript, []byte(want)) {
		t.Errorf("build.sh does not set %q", strings.TrimSpace(want))
	}
}

// An installation that lists numpy must import it: one whose numpy files
// are missing fails the check that install runs before swapping it in.
func TestVerifyPythonImportsNumpy(t *testing.T) {
	needNumpyAt(t, realPythonDir)
	if err := VerifyPython(context.Background(), realPythonDir); err != nil {
		t.Fatalf("the installed python does not import numpy: %v", err)
	}
	broken := t.TempDir()
	if err := copyPythonDir(realPythonDir, broken); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(broken, "lib", "python3.13", "numpy")); err != nil {
		t.Fatal(err)
	}
	err := VerifyPython(context.Background(), broken)
	if err == nil || !strings.Contains(err.Error(), "import numpy") || !strings.Contains(err.Error(), "No module named 'numpy'") {
		t.Errorf("without numpy's files: %v", err)
	}
}
