// Package confinedtest races reads of a file against swapping it for a
// symbolic link, for tests of confined reads.
package confinedtest

import (
	"os"
	"path/filepath"
	"sync"
)

// SwapWithLink replaces the file at path, over and over until stop is
// called, by a symbolic link to target and by a regular file holding
// content, each with an atomic rename. stop returns once swapping ended.
func SwapWithLink(path, target, content string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		next := filepath.Join(filepath.Dir(path), ".next-"+filepath.Base(path))
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			if i%2 == 0 {
				_ = os.Symlink(target, next)
			} else {
				_ = os.WriteFile(next, []byte(content), 0o644)
			}
			_ = os.Rename(next, path)
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
