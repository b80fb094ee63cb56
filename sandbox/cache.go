package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// DefaultCacheBytes caps the sandbox's on-disk caches together: the Go
// builds (about 3 MiB per distinct snippet) and wazero's compiled modules
// (about 15 MiB each, CPython's included). Past it, the least recently
// used entries go.
const DefaultCacheBytes = 1 << 30

// cacheEntry is one file of the caches.
type cacheEntry struct {
	path    string
	size    int64
	lastUse time.Time
}

// diskCache bounds the files under dir's go/ and wazero/ by size.
type diskCache struct {
	dir      string
	maxBytes int64
	mu       sync.Mutex // one eviction at a time
}

// used marks a cached file as just used, so that it is evicted last.
func used(path string) {
	now := time.Now()
	_ = os.Chtimes(path, now, now)
}

// evict removes the least recently used entries, but never keep (the
// build about to be run), until the caches hold at most maxBytes. A Go build's last use is when it was built or last
// found in the cache; a wazero entry's is when it was written or read
// (its access time, which Linux updates at most daily by default).
func (c *diskCache) evict(keep string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var entries []cacheEntry
	var total int64
	for _, pattern := range []string{filepath.Join(c.dir, "go", "*.wasm"), filepath.Join(c.dir, "wazero", "*", "*")} {
		paths, _ := filepath.Glob(pattern)
		for _, p := range paths {
			info, err := os.Lstat(p)
			if err != nil || !info.Mode().IsRegular() {
				continue
			}
			total += info.Size()
			if p != keep {
				entries = append(entries, cacheEntry{path: p, size: info.Size(), lastUse: lastUse(info)})
			}
		}
	}
	if total <= c.maxBytes {
		return
	}
	slices.SortFunc(entries, func(a, b cacheEntry) int { return a.lastUse.Compare(b.lastUse) })
	for _, e := range entries {
		if total <= c.maxBytes {
			return
		}
		if err := os.Remove(e.path); err == nil || os.IsNotExist(err) {
			total -= e.size
		}
	}
}
