package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/sandbox"
)

func TestSandboxUsage(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	cases := []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"sandbox"}, exitInvalid, "flowrun sandbox install python"},
		{[]string{"sandbox", "frob"}, exitInvalid, `unknown subcommand "frob"`},
		{[]string{"sandbox", "install"}, exitInvalid, "name what to install"},
		{[]string{"sandbox", "install", "ruby"}, exitInvalid, "name what to install"},
		{[]string{"sandbox", "install", "python", "--frm", "x"}, exitInvalid, "flag provided but not defined: -frm"},
		{[]string{"sandbox", "status", "extra"}, exitInvalid, `unexpected "extra"`},
		{[]string{"sandbox", "export", "extra"}, exitInvalid, `flowrun sandbox export: unexpected "extra"`},
		{[]string{"sandbox", "install", "python", "--sha256", strings.Repeat("0", 64)}, exitFailed, "a sha256 was given, but no archive to check it against (--sha256 checks the archive --from names)"},
		{[]string{"sandbox", "install", "python", "--from", t.TempDir(), "--sha256", strings.Repeat("0", 64)}, exitFailed, "is a directory (--sha256 checks the archive --from names)"},
		{[]string{"sandbox", "install", "python", "--from", filepath.Join(t.TempDir(), "nope")}, exitFailed, "no such file"},
	}
	for _, c := range cases {
		code, _, stderr := flowrun(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.stderr) {
			t.Errorf("%v: exit %d, want %d; stderr %q, want it to contain %q", c.args, code, c.code, stderr, c.stderr)
		}
		if c.code == exitInvalid && strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: want one line, got %q", c.args, stderr)
		}
	}
	for _, args := range [][]string{{"sandbox", "--help"}, {"sandbox", "install", "--help"}, {"sandbox", "export", "--help"}, {"sandbox", "status", "-h"}} {
		code, stdout, _ := flowrun(t, args...)
		if code != exitOK || !strings.Contains(stdout, "Usage") {
			t.Errorf("%v: exit %d, stdout %q", args, code, stdout)
		}
	}
}

func TestSandboxStatusEmptyCache(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	code, stdout, stderr := flowrun(t, "sandbox", "status")
	if code != exitOK || !strings.Contains(stdout, "python 3.13.5: not installed") || !strings.Contains(stdout, "run flowrun sandbox install python") {
		t.Errorf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	code, stdout, _ = flowrun(t, "sandbox", "status", "--json")
	var st struct {
		Python struct {
			Dir       string `json:"dir"`
			Installed bool   `json:"installed"`
		} `json:"python"`
	}
	if err := json.Unmarshal([]byte(stdout), &st); err != nil || code != exitOK {
		t.Fatalf("exit %d, %v: %s", code, err, stdout)
	}
	if st.Python.Installed || st.Python.Dir != filepath.Join(cache, "flowrun", "python", "3.13.5") {
		t.Errorf("status %+v", st)
	}
	if code, _, _ := flowrun(t, "sandbox", "status", "--verify"); code != exitFailed {
		t.Errorf("--verify with nothing installed: exit %d, want %d", code, exitFailed)
	}
}

// The real installation, read before any test points XDG_CACHE_HOME
// elsewhere.
var realPythonDir = sandbox.PythonDir()

// exportCLI runs flowrun sandbox export -o archive with the cache at
// cache, and returns the sha256 it printed.
func exportCLI(t *testing.T, cache, archive string) string {
	t.Helper()
	t.Setenv("XDG_CACHE_HOME", cache)
	code, stdout, stderr := flowrun(t, "sandbox", "export", "-o", archive)
	m := regexp.MustCompile(`(?m)^sha256 ([0-9a-f]{64})$`).FindStringSubmatch(stdout)
	if code != exitOK || m == nil {
		t.Fatalf("export: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	b, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != m[1] {
		t.Fatalf("export printed sha256 %s, the archive's is %x", m[1], sum)
	}
	side, err := os.ReadFile(archive + ".sha256")
	if want := m[1] + "  " + filepath.Base(archive) + "\n"; err != nil || string(side) != want {
		t.Fatalf("%s.sha256 = %q (%v), want %q", archive, side, err, want)
	}
	return m[1]
}

func TestHardening12SandboxExportCLI(t *testing.T) {
	out := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	code, _, stderr := flowrun(t, "sandbox", "export", "-o", filepath.Join(out, "none.tar.gz"))
	if code != exitFailed || !strings.Contains(stderr, "not installed") || !strings.Contains(stderr, "flowrun sandbox install python first") {
		t.Errorf("export with nothing installed: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "none.tar.gz")); err == nil {
		t.Error("wrote an archive of nothing")
	}

	// A layout that looks installed is enough to export; installing it
	// would fail its print(1) check, so the checksum is what refuses here.
	fake := t.TempDir()
	for name, body := range map[string]string{"python.wasm": "not wasm", "lib/python3.13/os.pyc": "os", "VERSION": "version=3.13.5\n"} {
		p := filepath.Join(fake, "flowrun", "python", "3.13.5", filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	archive := filepath.Join(out, "py.tar.gz")
	sum := exportCLI(t, fake, archive)
	first, _ := os.ReadFile(archive)
	if again := exportCLI(t, fake, archive); again != sum {
		t.Errorf("exporting again gave sha256 %s, then %s", sum, again)
	}
	if second, _ := os.ReadFile(archive); !bytes.Equal(first, second) {
		t.Error("exporting again gave different bytes")
	}

	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	zeros := strings.Repeat("0", 64)
	code, _, stderr = flowrun(t, "sandbox", "install", "python", "--from", archive, "--sha256", zeros)
	if code != exitFailed || !strings.Contains(stderr, "but the given sha256 says "+zeros) || !strings.Contains(stderr, "nothing was installed") {
		t.Errorf("install with a wrong --sha256: exit %d, stderr %q", code, stderr)
	}
	if sandbox.PythonStatus().Installed {
		t.Error("installed all the same")
	}

	if info := sandbox.PythonStatusAt(realPythonDir); !info.Installed {
		t.Skipf("Python for WASI is not installed (%s), so no round trip of a real one", info.Problem)
	}
	realCache := filepath.Dir(filepath.Dir(filepath.Dir(realPythonDir)))
	sum = exportCLI(t, realCache, archive)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	code, stdout, stderr := flowrun(t, "sandbox", "install", "python", "--from", archive, "--sha256", sum)
	if code != exitOK || !sandbox.PythonStatus().Installed {
		t.Fatalf("install of the real export: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
}

// status lists the installation's packages, and says when it predates
// numpy and what rebuilds it.
func TestSandboxStatusPackages(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	dir := sandbox.PythonDir()
	for name, body := range map[string]string{
		"python.wasm":           "\x00asm",
		"lib/python3.13/os.pyc": "os",
		"VERSION":               "version=3.13.5\nsource_sha256=abc\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, stdout, _ := flowrun(t, "sandbox", "status")
	if !strings.Contains(stdout, "packages     python 3.13.5\n") || !strings.Contains(stdout, "outdated") || !strings.Contains(stdout, "no numpy: run flowrun sandbox install python") {
		t.Errorf("a revision 1 installation:\n%s", stdout)
	}
	if err := os.WriteFile(filepath.Join(dir, "VERSION"), []byte("version=3.13.5\nbuild_revision=3\npackages=python 3.13.5, numpy 2.2.4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stdout, _ = flowrun(t, "sandbox", "status")
	if !strings.Contains(stdout, "packages     python 3.13.5, numpy 2.2.4\n") || strings.Contains(stdout, "outdated") || !strings.Contains(stdout, "\n  absent       scipy.ndimage: not built: ") {
		t.Errorf("a current installation:\n%s", stdout)
	}
	_, stdout, _ = flowrun(t, "sandbox", "status", "--json")
	var st struct {
		Python struct {
			Packages map[string]string `json:"packages"`
		} `json:"python"`
	}
	if err := json.Unmarshal([]byte(stdout), &st); err != nil || st.Python.Packages["numpy"] != "2.2.4" {
		t.Errorf("--json packages: %v %s", err, stdout)
	}
}

// TestSandboxStatusSaysHowCallsStart: an installation without the reactor
// build runs every call cold, and status says so and how to change it.
func TestSandboxStatusSaysHowCallsStart(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	dir := sandbox.PythonDir()
	stdlib := filepath.Join(dir, "lib", "python3.13")
	if err := os.MkdirAll(stdlib, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(dir, "python.wasm"), filepath.Join(stdlib, "os.pyc")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		snapshot bool
		want     string
	}{
		{false, "start CPython each time (no python-snapshot.wasm): run flowrun sandbox install python --force"},
		{true, "start from a pre-initialised interpreter"},
	} {
		if tc.snapshot {
			if err := os.WriteFile(filepath.Join(dir, "python-snapshot.wasm"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		code, stdout, stderr := flowrun(t, "sandbox", "status")
		if code != exitOK || !strings.Contains(stdout, tc.want) {
			t.Errorf("snapshot %v: exit %d\nstdout %s\nstderr %s", tc.snapshot, code, stdout, stderr)
		}
		_, stdout, _ = flowrun(t, "sandbox", "status", "--json")
		var st struct {
			Python struct {
				Snapshot bool `json:"snapshot"`
			} `json:"python"`
		}
		if err := json.Unmarshal([]byte(stdout), &st); err != nil || st.Python.Snapshot != tc.snapshot {
			t.Errorf("snapshot %v: --json says %+v (%v): %s", tc.snapshot, st, err, stdout)
		}
	}
}
