package sandbox

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// ExportTop is the directory that holds everything in an exported archive.
const ExportTop = "python-" + PythonVersion + "-wasi"

// exportTime is every entry's modification time: any fixed time will do,
// so that the archive's bytes depend on the files alone.
var exportTime = time.Date(2025, 6, 11, 0, 0, 0, 0, time.UTC)

// Bounds on what extracting an archive may write: the real installation
// is about 20 MB in about 550 entries.
const (
	maxArchiveBytes   = 1 << 30
	maxArchiveEntries = 50_000
)

// ErrNoChecksum says an archive to install came with no sha256 to check
// it by.
var ErrNoChecksum = errors.New("no sha256 to check it by")

// ErrSHA256WithoutArchive: a sha256 was given to install from something
// other than an archive.
var ErrSHA256WithoutArchive = errors.New("a sha256 was given, but no archive to check it against")

// ExportPython writes the Python installation in dir to w as one gzipped
// tar, everything inside ExportTop/, and returns the archive's sha256 in
// hex. The same files give the same bytes: entries in lexical order, one
// fixed time, no owners, and VERSION without the lines that say where and
// when this copy was installed.
func ExportPython(dir string, w io.Writer) (string, error) {
	sum := sha256.New()
	gz := gzip.NewWriter(io.MultiWriter(w, sum))
	tw := tar.NewWriter(gz)
	err := walkPythonTree(dir, func(rel string, isDir bool) error {
		name := ExportTop + "/" + filepath.ToSlash(rel)
		if isDir {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755, ModTime: exportTime})
		}
		if rel == "VERSION" {
			b, err := os.ReadFile(filepath.Join(dir, rel))
			if err != nil {
				return err
			}
			m := buildManifest(b)
			return writeTarFile(tw, name, int64(len(m)), strings.NewReader(m))
		}
		f, err := os.Open(filepath.Join(dir, rel))
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		return writeTarFile(tw, name, st.Size(), f)
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = gz.Close()
	}
	if err != nil {
		return "", fmt.Errorf("exporting %s: %w", dir, err)
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

func writeTarFile(tw *tar.Writer, name string, size int64, r io.Reader) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, ModTime: exportTime}); err != nil {
		return err
	}
	if _, err := io.Copy(tw, r); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// extractPythonArchive checks the archive's sha256 (see checkArchiveSum),
// unpacks the (gzipped) tar into scratch, then moves the directory holding
// python.wasm (the root, or a single top-level directory) to dst. Only
// files and directories are taken, all inside scratch (names that would
// leave it, links and special files are refused), and no more than
// maxArchiveBytes in maxArchiveEntries.
func extractPythonArchive(archive, wantSHA256, scratch, dst string) error {
	f, err := os.Open(archive)
	if err != nil {
		return fmt.Errorf("archive %s: %w", archive, err)
	}
	defer f.Close()
	if err := checkArchiveSum(f, archive, wantSHA256); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("archive %s: %w", archive, err)
	}
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("archive %s: %w", archive, err)
		}
		defer gz.Close()
		r = gz
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("archive %s: not a tarball of Python for WASI: %s", archive, fmt.Sprintf(format, args...))
	}
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return err
	}
	// The name checks below give the clear errors; the Root makes sure
	// that nothing is written outside scratch whatever they miss.
	root, err := os.OpenRoot(scratch)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	entries, left := 0, int64(maxArchiveBytes)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return bad("%v", err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if name == "." {
			continue
		}
		if path.IsAbs(h.Name) || name == ".." || strings.HasPrefix(name, "../") {
			return bad("entry %q leaves the archive", h.Name)
		}
		local := filepath.FromSlash(name)
		if strings.ContainsAny(name, `\:`) || !filepath.IsLocal(local) {
			return bad("entry %q is not a portable file name", h.Name)
		}
		if entries++; entries > maxArchiveEntries {
			return bad("it holds more than %d entries", maxArchiveEntries)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(local, 0o755); err != nil {
				return bad("%s: %v", h.Name, err)
			}
		case tar.TypeReg:
			if h.Size > left {
				return bad("it unpacks to more than %d MiB", maxArchiveBytes>>20)
			}
			left -= h.Size
			if err := extractFile(root, local, tr); err != nil {
				return bad("%s: %v", h.Name, err)
			}
		default:
			return bad("%q is a link or special file", h.Name)
		}
	}
	if entries == 0 {
		return bad("it is empty")
	}
	top := scratch
	if !fileExists(filepath.Join(top, "python.wasm")) {
		ents, _ := os.ReadDir(scratch)
		if len(ents) == 1 && ents[0].IsDir() {
			top = filepath.Join(scratch, ents[0].Name())
		}
	}
	if info := PythonStatusAt(top); !info.Installed {
		return bad("%s", strings.ReplaceAll(info.Problem, scratch+string(filepath.Separator), ""))
	}
	return os.Rename(top, dst)
}

func extractFile(root *os.Root, name string, r io.Reader) error {
	if dir := filepath.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	o, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(o, r); err != nil {
		o.Close()
		return err
	}
	return o.Close()
}

// checkArchiveSum checks f's sha256 against the one given and
// the one in ARCHIVE.sha256 beside it (sha256sum's format): at least one
// must be there, and every one there must match.
func checkArchiveSum(f *os.File, archive, given string) error {
	type claim struct{ by, sum string }
	var claims []claim
	if given != "" {
		claims = append(claims, claim{"the given sha256", given})
	}
	sidecar := archive + ".sha256"
	b, err := os.ReadFile(sidecar)
	switch {
	case err == nil:
		fields := strings.Fields(string(b))
		if len(fields) == 0 {
			return fmt.Errorf("archive %s: %s is empty; it should hold the archive's sha256", archive, sidecar)
		}
		claims = append(claims, claim{sidecar, fields[0]})
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("archive %s: reading its checksum: %w", archive, err)
	}
	if len(claims) == 0 {
		return fmt.Errorf("archive %s: %w: none was given, and there is no %s beside it", archive, ErrNoChecksum, filepath.Base(sidecar))
	}
	for _, c := range claims {
		if b, err := hex.DecodeString(c.sum); err != nil || len(b) != sha256.Size {
			return fmt.Errorf("archive %s: %s gives %q, which is not a sha256 (64 hex digits)", archive, c.by, c.sum)
		}
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("archive %s: %w", archive, err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	for _, c := range claims {
		if !strings.EqualFold(c.sum, got) {
			return fmt.Errorf("archive %s: its sha256 is %s, but %s says %s: refusing a damaged or altered archive (nothing was installed)", archive, got, c.by, strings.ToLower(c.sum))
		}
	}
	return nil
}

// Export writes the archive of the installation in dir (ExportPython) to
// a temporary file beside path and renames it into place, so that path is
// either complete or as it was; then path.sha256, as sha256sum prints
// it. It returns the archive's sha256 and size.
func Export(dir, path string) (sum string, size int64, err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return "", 0, fmt.Errorf("creating %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	sum, err = ExportPython(dir, f)
	if err != nil {
		f.Close()
		return "", 0, err
	}
	if size, err = f.Seek(0, io.SeekCurrent); err == nil {
		err = f.Close()
	}
	if err != nil {
		return "", 0, fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return "", 0, fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.WriteFile(path+".sha256", []byte(sum+"  "+filepath.Base(path)+"\n"), 0o644); err != nil {
		return "", 0, fmt.Errorf("writing its checksum: %w", err)
	}
	return sum, size, nil
}
