package sandbox

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/flowrun/flowrun/internal/proc"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// PythonVersion is the CPython version the sandbox runs, built for WASI by
// sandbox/python/build.sh.
const PythonVersion = "3.13.5"

// pythonMinor names the stdlib directory, lib/python3.13.
const pythonMinor = "3.13"

// pythonGuestLib is where the guest sees the stdlib: build.sh configures
// CPython with prefix /usr/local, so it finds it there with no environment.
const pythonGuestLib = "/usr/local/lib/python" + pythonMinor

//go:embed python/build.sh
var pythonBuildScript []byte

// PythonDir is where Python for WASI is installed:
// $XDG_CACHE_HOME/flowrun/python/3.13.5, or ~/.cache/flowrun/python/3.13.5.
// It holds python.wasm, lib/python3.13/ and VERSION.
func PythonDir() string {
	return filepath.Join(userCacheDir(), "flowrun", "python", PythonVersion)
}

// PythonInfo says what is installed in a Python directory.
type PythonInfo struct {
	Dir         string
	Installed   bool   // python.wasm and the stdlib are there
	Problem     string // why not, when not
	WasmBytes   int64
	StdlibBytes int64
	StdlibFiles int
	// Manifest holds VERSION's key=value lines: version, source_sha256,
	// build_date, and so on.
	Manifest map[string]string
}

// PythonStatus reports what is installed in PythonDir.
func PythonStatus() PythonInfo { return PythonStatusAt(PythonDir()) }

// PythonStatusAt reports what is installed in dir. It only looks at files;
// VerifyPython runs the interpreter.
func PythonStatusAt(dir string) PythonInfo {
	info := PythonInfo{Dir: dir}
	wasm := filepath.Join(dir, "python.wasm")
	st, err := os.Stat(wasm)
	if err != nil || !st.Mode().IsRegular() {
		info.Problem = "no " + wasm
		return info
	}
	info.WasmBytes = st.Size()
	stdlib := filepath.Join(dir, "lib", "python"+pythonMinor)
	if !fileExists(filepath.Join(stdlib, "os.pyc")) && !fileExists(filepath.Join(stdlib, "os.py")) {
		info.Problem = "no stdlib in " + stdlib
		return info
	}
	_ = filepath.WalkDir(stdlib, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.Mode().IsRegular() {
			info.StdlibBytes += fi.Size()
			info.StdlibFiles++
		}
		return nil
	})
	info.Manifest = readManifest(filepath.Join(dir, "VERSION"))
	if v := info.Manifest["version"]; v != "" && v != PythonVersion {
		info.Problem = fmt.Sprintf("%s holds Python %s, not %s", dir, v, PythonVersion)
		return info
	}
	info.Installed = true
	return info
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func readManifest(p string) map[string]string {
	m := map[string]string{}
	b, err := os.ReadFile(p)
	if err != nil {
		return m
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok && k != "" && !strings.HasPrefix(k, "#") {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

// InstallOptions tells InstallPython where Python comes from.
type InstallOptions struct {
	// From is a directory holding python.wasm and lib/python3.13 (the
	// output of sandbox/python/build.sh), or a .tar.gz of one (at its root
	// or in a single top-level directory). Empty: build from source with
	// the embedded build script, on a Debian-like machine with apt.
	From string
	// Force reinstalls over a working installation.
	Force bool
	// Stdout receives progress lines and the build's output; nil discards.
	Stdout io.Writer
}

// InstallPython installs Python for WASI into PythonDir. It assembles the
// new tree in a temporary directory next to the target, checks that it
// runs print(1) under wazero, and only then renames it into place, so the
// target is either the old installation or the complete new one.
func InstallPython(ctx context.Context, opts InstallOptions) (PythonInfo, error) {
	out := opts.Stdout
	if out == nil {
		out = io.Discard
	}
	target := PythonDir()
	if cur := PythonStatusAt(target); cur.Installed && !opts.Force {
		fmt.Fprintf(out, "Python %s is already installed in %s (--force to reinstall)\n", PythonVersion, target)
		return cur, nil
	}
	parent := filepath.Dir(target)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return PythonInfo{}, fmt.Errorf("creating %s: %w", parent, err)
	}
	removeStaleTemps(parent)
	tmp, err := os.MkdirTemp(parent, "."+PythonVersion+".tmp-")
	if err != nil {
		return PythonInfo{}, fmt.Errorf("creating a temporary directory in %s: %w", parent, err)
	}
	defer os.RemoveAll(tmp)
	staged := filepath.Join(tmp, "python")

	source := opts.From
	switch {
	case opts.From == "":
		source = "a build from source"
		if err := buildPython(ctx, staged, tmp, out); err != nil {
			return PythonInfo{}, err
		}
	default:
		st, err := os.Stat(opts.From)
		if err != nil {
			return PythonInfo{}, fmt.Errorf("--from %s: %w", opts.From, err)
		}
		if st.IsDir() {
			fmt.Fprintf(out, "copying Python from %s\n", opts.From)
			if err := copyPythonDir(opts.From, staged); err != nil {
				return PythonInfo{}, err
			}
		} else {
			fmt.Fprintf(out, "extracting Python from %s\n", opts.From)
			if err := extractPythonTarball(opts.From, filepath.Join(tmp, "x"), staged); err != nil {
				return PythonInfo{}, err
			}
		}
	}
	info := PythonStatusAt(staged)
	if info.Installed {
		// CPython warns at every start without it; build.sh makes it,
		// a layout assembled another way may not.
		if err := os.MkdirAll(filepath.Join(staged, "lib", "python"+pythonMinor, "lib-dynload"), 0o755); err != nil {
			return PythonInfo{}, err
		}
	} else {
		return PythonInfo{}, fmt.Errorf("%s is not Python for WASI: %s", source, info.Problem)
	}
	if err := stampManifest(staged, info.Manifest, source); err != nil {
		return PythonInfo{}, err
	}

	fmt.Fprintf(out, "checking that python.wasm runs print(1)\n")
	if err := VerifyPython(ctx, staged); err != nil {
		return PythonInfo{}, fmt.Errorf("%s does not run: %w", source, err)
	}

	// Swap it in: move any old installation aside, rename, remove the old.
	var old string
	if _, err := os.Lstat(target); err == nil {
		old = filepath.Join(tmp, "old")
		if err := os.Rename(target, old); err != nil {
			return PythonInfo{}, fmt.Errorf("moving the old installation aside: %w", err)
		}
	}
	if err := os.Rename(staged, target); err != nil {
		if old != "" {
			_ = os.Rename(old, target)
		}
		return PythonInfo{}, fmt.Errorf("installing into %s: %w", target, err)
	}
	info = PythonStatusAt(target)
	fmt.Fprintf(out, "installed Python %s in %s\n", PythonVersion, target)
	return info, nil
}

// removeStaleTemps removes temporary trees that an install killed outright
// (no deferred cleanup) left beside the target, once they are a day old.
func removeStaleTemps(parent string) {
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "."+PythonVersion+".tmp-") {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > 24*time.Hour {
			_ = os.RemoveAll(filepath.Join(parent, e.Name()))
		}
	}
}

// stampManifest records where the installation came from in VERSION.
func stampManifest(dir string, m map[string]string, source string) error {
	var b strings.Builder
	if len(m) == 0 {
		fmt.Fprintf(&b, "version=%s\n", PythonVersion)
	} else {
		prev, err := os.ReadFile(filepath.Join(dir, "VERSION"))
		if err != nil {
			return err
		}
		// Keep the build's lines; replace an earlier installation's.
		for _, line := range strings.Split(strings.TrimRight(string(prev), "\n"), "\n") {
			if !strings.HasPrefix(line, "installed_from=") && !strings.HasPrefix(line, "install_date=") {
				b.WriteString(line + "\n")
			}
		}
	}
	fmt.Fprintf(&b, "installed_from=%s\ninstall_date=%s\n", source, time.Now().UTC().Format(time.RFC3339))
	return os.WriteFile(filepath.Join(dir, "VERSION"), []byte(b.String()), 0o644)
}

// buildPython runs the embedded build script into dst.
func buildPython(ctx context.Context, dst, tmp string, out io.Writer) error {
	if !fileExists("/etc/debian_version") {
		return errors.New("not a Debian-like machine with apt: build elsewhere with sandbox/python/build.sh and pass --from DIR (or a .tar.gz of it)")
	}
	for _, tool := range []string{"apt-get", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("not a Debian-like machine with apt (no %s): build elsewhere with sandbox/python/build.sh and pass --from DIR (or a .tar.gz of it)", tool)
		}
	}
	script := filepath.Join(tmp, "build.sh")
	if err := os.WriteFile(script, pythonBuildScript, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(out, "building Python %s for WASI from source (several minutes)\n", PythonVersion)
	cmd := exec.CommandContext(ctx, "bash", script, dst)
	cmd.Stdout, cmd.Stderr = out, out
	// Own process group, so that cancelling stops make and the compilers
	// too; the script's trap removes its temporary apt entry on TERM.
	g, err := proc.Start(cmd, proc.Limits{Grace: 30 * time.Second})
	if err != nil {
		return fmt.Errorf("starting the Python build: %w", err)
	}
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("build stopped: %w", ctx.Err())
		}
		return fmt.Errorf("building Python failed (%v): see the output above; or build elsewhere and pass --from DIR", err)
	}
	return nil
}

// copyPythonDir copies python.wasm, VERSION and lib/ from src into dst.
func copyPythonDir(src, dst string) error {
	if info := PythonStatusAt(src); !info.Installed {
		return fmt.Errorf("--from %s: not a Python for WASI directory (%s); it needs python.wasm and lib/python%s/", src, info.Problem, pythonMinor)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"python.wasm", "VERSION"} {
		if name == "VERSION" && !fileExists(filepath.Join(src, name)) {
			continue
		}
		if err := copyFile(filepath.Join(src, name), filepath.Join(dst, name), 0o644); err != nil {
			return err
		}
	}
	lib := filepath.Join(src, "lib")
	return filepath.WalkDir(lib, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type().IsRegular():
			return copyFile(p, to, 0o644)
		case d.Type()&fs.ModeSymlink != 0:
			// Follow links to files (a layout assembled by hand may use
			// them); the installed copy holds only regular files.
			st, err := os.Stat(p)
			if err != nil || !st.Mode().IsRegular() {
				return fmt.Errorf("--from %s: %s is a link to something other than a file", src, rel)
			}
			return copyFile(p, to, 0o644)
		default:
			return fmt.Errorf("--from %s: %s is not a file or directory", src, rel)
		}
	})
}

func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	o, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(o, in); err != nil {
		o.Close()
		return fmt.Errorf("copying %s: %w", src, err)
	}
	return o.Close()
}

// extractPythonTarball unpacks a (gzipped) tar into scratch, then moves
// the directory holding python.wasm (the root, or a single top-level
// directory) to dst. Only files and directories are taken; absolute names,
// .. and links are refused.
func extractPythonTarball(tarball, scratch, dst string) error {
	f, err := os.Open(tarball)
	if err != nil {
		return fmt.Errorf("--from %s: %w", tarball, err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("--from %s: %w", tarball, err)
		}
		defer gz.Close()
		r = gz
	}
	tr := tar.NewReader(r)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("--from %s: not a tarball of Python for WASI: %s", tarball, fmt.Sprintf(format, args...))
	}
	entries := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return bad("%v", err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if name == "." {
			continue
		}
		if path.IsAbs(h.Name) || name == ".." || strings.HasPrefix(name, "../") {
			return bad("entry %q leaves the archive", h.Name)
		}
		to := filepath.Join(scratch, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(to, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
				return err
			}
			o, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			if _, err := io.Copy(o, tr); err != nil {
				o.Close()
				return bad("%s: %v", h.Name, err)
			}
			if err := o.Close(); err != nil {
				return err
			}
		case tar.TypeXGlobalHeader:
			continue
		default:
			return bad("%q is a link or special file", h.Name)
		}
		entries++
	}
	if entries == 0 {
		return bad("it is empty")
	}
	root := scratch
	if !fileExists(filepath.Join(root, "python.wasm")) {
		ents, _ := os.ReadDir(scratch)
		if len(ents) == 1 && ents[0].IsDir() {
			root = filepath.Join(scratch, ents[0].Name())
		}
	}
	if info := PythonStatusAt(root); !info.Installed {
		return bad("%s", strings.ReplaceAll(info.Problem, scratch+string(filepath.Separator), ""))
	}
	return os.Rename(root, dst)
}

// VerifyPython runs `python -c "print(1)"` from dir under wazero, with the
// stdlib mounted read-only where the guest looks for it, no environment
// and no network, and checks that it prints 1.
func VerifyPython(ctx context.Context, dir string) error {
	info := PythonStatusAt(dir)
	if !info.Installed {
		return errors.New(info.Problem)
	}
	wasm, err := os.ReadFile(filepath.Join(dir, "python.wasm"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(true))
	defer rt.Close(context.Background())
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	compiled, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		return fmt.Errorf("compiling python.wasm: %w", err)
	}
	var stdout, stderr bytes.Buffer
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithArgs("python"+pythonMinor, "-c", "print(1)").
		WithStdout(&stdout).
		WithStderr(&stderr).
		WithFSConfig(wazero.NewFSConfig().WithReadOnlyDirMount(filepath.Join(dir, "lib", "python"+pythonMinor), pythonGuestLib))
	_, err = rt.InstantiateModule(ctx, compiled, cfg)
	var exit *sys.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 0 {
		err = nil
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("no answer within 2 minutes: %w", ctx.Err())
		}
		return fmt.Errorf("python -c 'print(1)': %v%s", err, tail(stderr.String()))
	}
	if got := stdout.String(); got != "1\n" {
		return fmt.Errorf("python -c 'print(1)' printed %q, want \"1\\n\"%s", got, tail(stderr.String()))
	}
	if s := strings.TrimSpace(stderr.String()); s != "" {
		return fmt.Errorf("python -c 'print(1)' wrote to stderr:%s", tail(s))
	}
	return nil
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return "\n" + s
}
