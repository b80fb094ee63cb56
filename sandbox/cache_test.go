package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/errclass"
)

// The caches keep the most recently used entries within their cap: the
// oldest go, across Go builds and compiled modules, and an entry used
// again (a Go build found in the cache) counts as new.
func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	dir := t.TempDir()
	start := time.Now().Add(-time.Hour)
	write := func(rel string, age int) string {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, 100), 0o644); err != nil {
			t.Fatal(err)
		}
		at := start.Add(time.Duration(age) * time.Minute)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
		return p
	}
	oldest := write("go/a.wasm", 1)
	oldModule := write("wazero/v1/aa", 2)
	reused := write("go/b.wasm", 3)
	newModule := write("wazero/v1/bb", 4)
	newest := write("go/c.wasm", 5)
	used(reused)
	(&diskCache{dir: dir, maxBytes: 300}).evict(newest)
	for path, kept := range map[string]bool{oldest: false, oldModule: false, reused: true, newModule: true, newest: true} {
		if _, err := os.Stat(path); (err == nil) != kept {
			t.Errorf("%s: kept %v, want %v", path, err == nil, kept)
		}
	}
}

// A new Go build evicts older ones past the cap, never itself.
func TestGoBuildEvictsOlderBuilds(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain")
	}
	s := New(Options{CacheDir: t.TempDir(), CacheBytes: 1})
	defer s.Close()
	var modules []string
	for _, answer := range []string{"1", "2"} {
		j, res, err := s.prepare(context.Background(), Request{Language: Go, Source: goFn("", "return "+answer), Call: "f", Limits: Limits{}.withDefaults()})
		if err != nil || res != nil {
			t.Fatal(err, res)
		}
		modules = append(modules, j.Module)
	}
	if _, err := os.Stat(modules[0]); err == nil {
		t.Errorf("the older build %s outlived a cap of 1 byte", modules[0])
	}
	if _, err := os.Stat(modules[1]); err != nil {
		t.Errorf("the build just made is gone: %v", err)
	}
}

// With every build slot taken, a Go snippet waits without compiling, and
// its timeout says what it waited for.
func TestGoBuildsWaitForASlot(t *testing.T) {
	s := New(Options{CacheDir: t.TempDir(), GoBuilds: 1})
	defer s.Close()
	s.goCache.slots <- struct{}{} // a build that never ends
	_, res, err := s.prepare(context.Background(), Request{Language: Go, Source: goFn("", "return 1"), Call: "f", Limits: Limits{Timeout: 100 * time.Millisecond}.withDefaults()})
	if err != nil || res == nil || res.Error.Class != errclass.Timeout ||
		!strings.Contains(res.Error.Message, "waiting for one of the 1 go builds that run at once") {
		t.Fatalf("got %v %+v, want a timeout while waiting for a build slot", err, res)
	}
	assertBuildGone(t, s.opts.CacheDir)
}
