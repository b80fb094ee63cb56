// Package npmtest runs programs published on npm (mock servers, MCP
// servers) from tests that check flowrun against software nobody here
// wrote. Packages are pinned to exact versions and installed once into
// a cache directory shared by every test and by .ci/run, so a test never
// waits on the registry after the first install. A test that needs one
// skips, saying what to install, when Node.js is absent; when CI=true it
// fails instead, because CI promises to run these suites.
package npmtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/flowrun/flowrun/internal/testneed"
)

// Pinned packages. .ci/run installs every one of them (flowrun's own
// tests read this list through `go run ./internal/npmtest/install`).
var Pinned = map[string]string{
	"@dwmkerr/mock-llm":                       "0.1.29",
	"@modelcontextprotocol/server-everything": "2026.8.31",
	"@modelcontextprotocol/server-filesystem": "2026.8.31",
	"@modelcontextprotocol/inspector":         "2.12.0",
}

// Dir is where pinned packages are installed.
func Dir() string {
	if d := os.Getenv("FLOWRUN_NPM_DIR"); d != "" {
		return d
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	return filepath.Join(cache, "flowrun", "npm")
}

var installMu sync.Mutex

// Install installs pkg at its pinned version into Dir unless it is there.
func Install(pkg string) error {
	version, ok := Pinned[pkg]
	if !ok {
		return fmt.Errorf("npm package %s is not pinned in internal/npmtest", pkg)
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return fmt.Errorf("npm not found: install Node.js (Debian: apt-get install nodejs npm) to run the suites against %s", pkg)
	}
	installMu.Lock()
	defer installMu.Unlock()
	dir := Dir()
	if installedVersion(dir, pkg) == version && version != "" {
		return nil
	}
	spec := pkg
	if version != "" {
		spec += "@" + version
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", dir, spec)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("npm install %s: %w\n%s", spec, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func installedVersion(dir, pkg string) string {
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", filepath.FromSlash(pkg), "package.json"))
	if err != nil {
		return ""
	}
	const key = `"version": "`
	i := strings.Index(string(b), key)
	if i < 0 {
		return ""
	}
	rest := string(b[i+len(key):])
	return rest[:strings.IndexByte(rest, '"')]
}

// Command returns a command running bin (an executable the package
// installs under node_modules/.bin) with args, after installing pkg. It
// skips t when Node.js is missing, except under CI=true where it fails.
func Command(t testing.TB, pkg, bin string, args ...string) *exec.Cmd {
	t.Helper()
	testneed.Need(t, testneed.NodeJS, Install(pkg))
	return exec.Command(filepath.Join(Dir(), "node_modules", ".bin", bin), args...)
}
