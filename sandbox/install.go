package sandbox

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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

// pythonBuildRevision is build.sh's BUILD_REVISION, recorded in VERSION as
// build_revision: an installation an older script built lacks what this
// one adds (revision 2: numpy; 3: python-snapshot.wasm), so install
// rebuilds it.
const pythonBuildRevision = 3

//go:embed python/flowrun_snapshot.c
var pythonSnapshotEntry []byte

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
	// Snapshot says python-snapshot.wasm is there, so calls start from a
	// pre-initialised interpreter rather than starting CPython each time.
	Snapshot bool
	// Kept says InstallPython found a working installation of this
	// version and left it as it was.
	Kept bool
	// Manifest holds VERSION's key=value lines: version, source_sha256,
	// build_date, and so on.
	Manifest map[string]string
	// Packages are the installation's packages and their versions, as
	// VERSION lists them ("python 3.13.5, numpy 2.2.4").
	Packages []Package
	// Outdated says why an installed tree predates the build script
	// (it still runs, without what newer builds add); empty when current.
	Outdated string
	// Absent are the packages ARC code asks for that this installation
	// lacks, each with why the build has none.
	Absent []AbsentPackage
}

// Package is one package of the Python installation.
type Package struct {
	Name, Version string
}

// AbsentPackage is a package the installation lacks, and why.
type AbsentPackage struct {
	Name, Why string
}

// missingPackages are the packages model-written ARC code imports that no
// build has yet (docs/sandbox.md, "scipy.ndimage").
var missingPackages = []AbsentPackage{
	{"scipy.ndimage", "not built: its own C, C++ and Cython need no Fortran, but no scipy release archive can be fetched where the sandbox is built, and scipy's build needs a LAPACK for WASI"},
}

// HasPackage reports whether the installation has the named package.
func (p PythonInfo) HasPackage(name string) bool {
	for _, pk := range p.Packages {
		if pk.Name == name {
			return true
		}
	}
	return false
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
	info.Snapshot = fileExists(filepath.Join(dir, snapshotWasm))
	info.Manifest = readManifest(filepath.Join(dir, "VERSION"))
	if v := info.Manifest["version"]; v != "" && v != PythonVersion {
		info.Problem = fmt.Sprintf("%s holds Python %s, not %s", dir, v, PythonVersion)
		return info
	}
	info.Installed = true
	info.Packages = parsePackages(info.Manifest["packages"])
	if len(info.Packages) == 0 {
		info.Packages = []Package{{"python", info.Manifest["version"]}}
	}
	for _, m := range missingPackages {
		if !info.HasPackage(strings.SplitN(m.Name, ".", 2)[0]) {
			info.Absent = append(info.Absent, m)
		}
	}
	if rev := info.Manifest["build_revision"]; rev != fmt.Sprint(pythonBuildRevision) {
		if rev == "" {
			rev = "1"
		}
		lacks := "no numpy"
		if rev == "2" {
			lacks = "no pre-initialised interpreter (python-snapshot.wasm)"
		}
		info.Outdated = fmt.Sprintf("built by build script revision %s, not %d: it has %s", rev, pythonBuildRevision, lacks)
	}
	return info
}

// parsePackages reads VERSION's packages line: "name version" pairs
// separated by commas.
func parsePackages(s string) []Package {
	var out []Package
	for _, f := range strings.Split(s, ",") {
		if name, version, ok := strings.Cut(strings.TrimSpace(f), " "); ok {
			out = append(out, Package{name, strings.TrimSpace(version)})
		}
	}
	return out
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
	// or in a single top-level directory) such as ExportPython writes.
	// Empty: build from source with the embedded build script, on a
	// Debian-like Linux machine with apt.
	From string
	// SHA256 is the archive's sha256 in hex. An archive is installed only
	// when its sha256 matches this and the one in FROM.sha256 beside it,
	// and at least one of the two is given.
	SHA256 string
	// Force reinstalls over a working installation.
	Force bool
	// CacheDir is the sandbox cache the install compiles python.wasm
	// into and makes the pre-initialised interpreter in; empty, the
	// sandbox's default, which code nodes use unless told otherwise.
	CacheDir string
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
	if opts.SHA256 != "" {
		if opts.From == "" {
			return PythonInfo{}, ErrSHA256WithoutArchive
		}
		if st, err := os.Stat(opts.From); err == nil && st.IsDir() {
			return PythonInfo{}, fmt.Errorf("%w: %s is a directory", ErrSHA256WithoutArchive, opts.From)
		}
	}
	target := PythonDir()
	if cur := PythonStatusAt(target); cur.Installed && !opts.Force {
		if cur.Outdated == "" {
			fmt.Fprintf(out, "Python %s is already installed in %s\n", PythonVersion, target)
			cur.Kept = true
			warmAfterInstall(ctx, out, target, opts.CacheDir)
			return cur, nil
		}
		fmt.Fprintf(out, "Python %s in %s is outdated (%s): replacing it\n", PythonVersion, target, cur.Outdated)
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
			return PythonInfo{}, fmt.Errorf("installing from %s: %w", opts.From, err)
		}
		if st.IsDir() {
			fmt.Fprintf(out, "copying Python from %s\n", opts.From)
			if err := copyPythonDir(opts.From, staged); err != nil {
				return PythonInfo{}, err
			}
		} else {
			fmt.Fprintf(out, "extracting Python from %s\n", opts.From)
			if err := extractPythonArchive(opts.From, opts.SHA256, filepath.Join(tmp, "x"), staged); err != nil {
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

	fmt.Fprintf(out, "checking that python.wasm runs %s\n", verifyProgram(info))
	if err := verifyPython(ctx, staged, opts.CacheDir); err != nil {
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
	warmAfterInstall(ctx, out, target, opts.CacheDir)
	return info, nil
}

// warmAfterInstall has the sandbox compile python.wasm into cacheDir
// and make its pre-initialised interpreter there, so that the first code
// node after an install starts warm instead of paying for the compile
// (seconds on an idle machine, minutes on a loaded one). It can only
// fail into a cold start later: the installation is verified by then.
func warmAfterInstall(ctx context.Context, out io.Writer, pythonDir, cacheDir string) {
	fmt.Fprintln(out, "preparing the sandbox's pre-initialised interpreter")
	why, _, err := warmStart(ctx, pythonDir, cacheDir)
	switch {
	case err != nil:
		fmt.Fprintf(out, "code nodes will start cold until a first call prepares it: %v\n", err)
	case why != "":
		fmt.Fprintf(out, "code nodes start cold: %s\n", why)
	}
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
		b.WriteString(buildManifest(prev))
	}
	fmt.Fprintf(&b, "installed_from=%s\ninstall_date=%s\n", source, time.Now().UTC().Format(time.RFC3339))
	return os.WriteFile(filepath.Join(dir, "VERSION"), []byte(b.String()), 0o644)
}

// buildManifest is a VERSION file's text without the lines that say where
// and when this copy was installed.
func buildManifest(version []byte) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(string(version), "\n"), "\n") {
		if !strings.HasPrefix(line, "installed_from=") && !strings.HasPrefix(line, "install_date=") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// BuildError says CPython for WASI was not built here: this machine
// cannot build it, or the build failed. An installation exported where
// the build works (ExportPython) installs here from its archive instead.
type BuildError struct {
	Reason string
	Failed bool // the build ran and failed; its output says more
}

func (e *BuildError) Error() string { return e.Reason }

// canBuildPython says why CPython for WASI cannot be built from source on
// goos, if it cannot: build.sh needs Linux.
func canBuildPython(goos string) error {
	if goos != "linux" {
		return &BuildError{Reason: fmt.Sprintf("building CPython for WASI from source works on Linux only, not %s", goos)}
	}
	return nil
}

// buildPython runs the embedded build script into dst.
func buildPython(ctx context.Context, dst, tmp string, out io.Writer) error {
	if err := canBuildPython(runtime.GOOS); err != nil {
		return err
	}
	if !fileExists("/etc/debian_version") {
		return &BuildError{Reason: "not a Debian-like machine with apt"}
	}
	for _, tool := range []string{"apt-get", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			return &BuildError{Reason: fmt.Sprintf("not a Debian-like machine with apt (no %s)", tool)}
		}
	}
	script := filepath.Join(tmp, "build.sh")
	if err := os.WriteFile(script, pythonBuildScript, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "flowrun_snapshot.c"), pythonSnapshotEntry, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "building Python %s for WASI from source (several minutes)\n", PythonVersion)
	hb := startHeartbeat(out, 15*time.Second)
	defer hb.Close()
	cmd := exec.CommandContext(ctx, "bash", script, dst)
	cmd.Stdout, cmd.Stderr = hb, hb
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
		return &BuildError{Reason: fmt.Sprintf("building Python failed (%v): see the output above", err), Failed: true}
	}
	return nil
}

// walkPythonTree visits what makes up the Python installation in src, in
// lexical order with directories before their contents: VERSION (when
// there), lib/ and everything in it, python-snapshot.wasm (when there) and
// python.wasm. rel is the path
// under src. A link to a file is visited as that file (a layout assembled
// by hand may use them); anything else that is not a file or directory
// is an error.
func walkPythonTree(src string, visit func(rel string, isDir bool) error) error {
	if info := PythonStatusAt(src); !info.Installed {
		return fmt.Errorf("not a Python for WASI directory (%s); it needs python.wasm and lib/python%s/", info.Problem, pythonMinor)
	}
	if fileExists(filepath.Join(src, "VERSION")) {
		if err := visit("VERSION", false); err != nil {
			return err
		}
	}
	err := filepath.WalkDir(filepath.Join(src, "lib"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return visit(rel, true)
		case d.Type().IsRegular():
			return visit(rel, false)
		case d.Type()&fs.ModeSymlink != 0:
			if !fileExists(p) {
				return fmt.Errorf("%s is a link to something other than a file", rel)
			}
			return visit(rel, false)
		}
		return fmt.Errorf("%s is not a file or directory", rel)
	})
	if err != nil {
		return err
	}
	if fileExists(filepath.Join(src, snapshotWasm)) {
		if err := visit(snapshotWasm, false); err != nil {
			return err
		}
	}
	return visit("python.wasm", false)
}

// copyPythonDir copies python.wasm, python-snapshot.wasm, VERSION and lib/ from src into dst;
// the copy holds only regular files.
func copyPythonDir(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	err := walkPythonTree(src, func(rel string, isDir bool) error {
		to := filepath.Join(dst, rel)
		if isDir {
			return os.MkdirAll(to, 0o755)
		}
		return copyFile(filepath.Join(src, rel), to, 0o644)
	})
	if err != nil {
		return fmt.Errorf("installing from %s: %w", src, err)
	}
	return nil
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

// verifyProgram is what VerifyPython runs: numpy's extension modules are
// linked into python.wasm and its files are in the stdlib directory, so
// importing it checks both.
func verifyProgram(info PythonInfo) string {
	if info.HasPackage("numpy") {
		return "import numpy; print(1)"
	}
	return "print(1)"
}

// verifyTimeout only guards against a hang: compiling the 14 MB
// python.wasm with numpy takes seconds on an idle machine, but minutes on a
// loaded one or under the race detector, and a slow machine is no broken
// installation.
const verifyTimeout = 10 * time.Minute

// WarmStart runs a trivial Python call with the installation in dir the
// way a code node does, and says why such calls start CPython from
// scratch instead of from its pre-initialised interpreter (coldStart, ""
// when they start warm) and why each gets a new instance instead of
// reusing the last call's (noReuse, "" when they reuse it).
func WarmStart(ctx context.Context, dir string) (coldStart, noReuse string, err error) {
	return warmStart(ctx, dir, "")
}

func warmStart(ctx context.Context, dir, cacheDir string) (coldStart, noReuse string, err error) {
	s := New(Options{PythonDir: dir, CacheDir: cacheDir})
	defer s.Close()
	res, err := s.Run(ctx, Request{Language: Python, Source: "def f():\n    return 1\n", Call: "f"})
	if err != nil {
		return "", "", err
	}
	if !res.OK {
		return "", "", fmt.Errorf("return 1 failed: %s", res.Error.Message)
	}
	return s.ColdStart(), s.NoReuse(), nil
}

// VerifyPython runs `python -c "print(1)"` (with `import numpy` first when
// the installation lists numpy) from dir under wazero, with the stdlib
// mounted read-only where the guest looks for it, no environment and no
// network, and checks that it prints 1.
func VerifyPython(ctx context.Context, dir string) error {
	return verifyPython(ctx, dir, "")
}

// verifyPython compiles through the sandbox's compilation cache in
// cacheDir (the default when empty), so that the compile the check pays
// is one a later install of the same python.wasm does not pay again.
func verifyPython(ctx context.Context, dir, cacheDir string) error {
	if cacheDir == "" {
		cacheDir = defaultCacheDir()
	}
	info := PythonStatusAt(dir)
	if !info.Installed {
		return errors.New(info.Problem)
	}
	prog := verifyProgram(info)
	wasm, err := os.ReadFile(filepath.Join(dir, "python.wasm"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	cache, err := wazero.NewCompilationCacheWithDir(filepath.Join(cacheDir, "wazero"))
	if err != nil {
		return fmt.Errorf("compilation cache in %s: %w", cacheDir, err)
	}
	defer cache.Close(context.Background())
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache).WithCloseOnContextDone(true))
	defer rt.Close(context.Background())
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	compiled, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		return fmt.Errorf("compiling python.wasm: %w", err)
	}
	var stdout, stderr bytes.Buffer
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithArgs("python"+pythonMinor, "-c", prog).
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
			err = fmt.Errorf("no answer within %v: %w", verifyTimeout, ctx.Err())
		}
		return fmt.Errorf("python -c '%s': %v%s", prog, err, tail(stderr.String()))
	}
	if got := stdout.String(); got != "1\n" {
		return fmt.Errorf("python -c '%s' printed %q, want \"1\\n\"%s", prog, got, tail(stderr.String()))
	}
	if s := strings.TrimSpace(stderr.String()); s != "" {
		return fmt.Errorf("python -c '%s' wrote to stderr:%s", prog, tail(s))
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
