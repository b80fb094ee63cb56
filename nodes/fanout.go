package nodes

import (
	"context"
	"sync"
)

// fanOut runs task(i) for i in [0, n) on at most limit goroutines and
// waits for all of them. When stopOnError is set, the first error cancels
// the tasks still running and is returned; otherwise every task runs and
// errs[i] holds each one's error.
func fanOut(ctx context.Context, n, limit int, stopOnError bool, task func(ctx context.Context, i int) error) (errs []error, first error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs = make([]error, n)
	limit = max(1, min(limit, n))
	var (
		mu   sync.Mutex
		next int
		wg   sync.WaitGroup
	)
	for range limit {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stopped := first != nil && stopOnError
				mu.Unlock()
				if i >= n || stopped {
					return
				}
				if err := task(ctx, i); err != nil {
					errs[i] = err
					mu.Lock()
					if first == nil {
						first = err
						if stopOnError {
							cancel()
						}
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return errs, first
}
