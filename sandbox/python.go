package sandbox

import (
	_ "embed"
	"os"
	"path/filepath"
)

//go:embed harness.py
var pythonHarness string

// pythonArgs start CPython without site (faster, and nothing to import from
// outside the stdlib), without writing bytecode, ignoring any environment.
var pythonArgs = []string{"python3.13", "-S", "-B", "-E", "-c", pythonHarness}

// pythonLayout finds python.wasm and the stdlib under dir, or says what is missing.
func pythonLayout(dir string) (wasm, stdlib, problem string) {
	wasm = filepath.Join(dir, "python.wasm")
	stdlib = filepath.Join(dir, "lib", "python"+pythonMinor)
	if _, err := os.Stat(wasm); err != nil {
		return "", "", "no " + wasm
	}
	if _, err := os.Stat(filepath.Join(stdlib, "os.pyc")); err != nil {
		if _, err := os.Stat(filepath.Join(stdlib, "os.py")); err != nil {
			return "", "", "no stdlib in " + stdlib
		}
	}
	return wasm, stdlib, ""
}

func userCacheDir() string {
	if base := os.Getenv("XDG_CACHE_HOME"); base != "" {
		return base
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache")
}

// defaultCacheDir holds compiled modules and Go builds.
func defaultCacheDir() string {
	return filepath.Join(userCacheDir(), "flowrun", "sandbox")
}
