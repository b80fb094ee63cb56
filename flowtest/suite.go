package flowtest

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/flowrun/flowrun/dsl"
)

// Find returns the *.test.yaml files under paths (files or directories),
// sorted.
func Find(paths []string) ([]string, error) {
	var out []string
	for _, root := range paths {
		info, err := os.Stat(root)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			out = append(out, root)
			continue
		}
		err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && path != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(d.Name(), ".test.yaml") {
				out = append(out, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(out)
	return out, nil
}

// LoadAll loads test files, returning those that load and the problems
// of those that do not.
func LoadAll(paths []string) ([]*File, dsl.Diagnostics) {
	var files []*File
	var ds dsl.Diagnostics
	for _, p := range paths {
		f, fds := Load(p)
		ds = append(ds, fds...)
		if f != nil {
			files = append(files, f)
		}
	}
	return files, ds
}

// RunAll runs every case of files whose name matches filter (nil: all),
// workers at a time, and returns the results in file and case order.
func (r *Runner) RunAll(ctx context.Context, files []*File, filter *regexp.Regexp, workers int) []*Result {
	type job struct {
		f *File
		c *Case
		i int
	}
	var jobs []job
	for _, f := range files {
		for _, c := range f.Cases {
			if filter == nil || filter.MatchString(c.Name) {
				jobs = append(jobs, job{f, c, len(jobs)})
			}
		}
	}
	results := make([]*Result, len(jobs))
	queue := make(chan job)
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range queue {
				results[j.i] = r.Run(ctx, j.f, j.c)
			}
		}()
	}
	for _, j := range jobs {
		queue <- j
	}
	close(queue)
	wg.Wait()
	return results
}
