package dsl

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"sort"
)

// Source is one file a load read, with its content: the pipeline file, the
// prompts, schemas and called or tool pipelines it names, and the files a
// literal read_file, render or module names. A run keeps them all, so that
// a resume can refuse, and say where, when any of them changed.
type Source struct {
	Path    string // relative to the directory of the pipeline that was run, slash-separated
	Content string
}

// record notes a file the load read (abs is its absolute path).
func (l *loader) record(abs string, content []byte) {
	rel, err := filepath.Rel(l.root, abs)
	if err != nil {
		rel = abs
	}
	rel = filepath.ToSlash(rel)
	if _, seen := l.read[rel]; !seen {
		l.read[rel] = string(content)
	}
}

// readAt records a file named relative to this pipeline file.
func (f *file) recordFile(rel string, content []byte) {
	abs, _ := filepath.Abs(filepath.Join(f.dir, rel))
	f.l.record(abs, content)
}

// bundle is every file the load read, sorted by path, and the hash of them
// all: a pipeline's version.
func (l *loader) bundle() ([]Source, string) {
	paths := make([]string, 0, len(l.read))
	for p := range l.read {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	out := make([]Source, len(paths))
	h := sha256.New()
	for i, p := range paths {
		out[i] = Source{Path: p, Content: l.read[p]}
		sum := sha256.Sum256([]byte(l.read[p]))
		h.Write([]byte(p))
		h.Write([]byte{0})
		h.Write(sum[:])
	}
	return out, hex.EncodeToString(h.Sum(nil))
}

// SourceChanges compares the files a run started with to what they are
// now: for each file that changed, appeared or went away, its path and
// what differs (diff says how two versions of one file differ).
func SourceChanges(was, now []Source, diff func(old, cur string) string) []string {
	old := map[string]string{}
	for _, s := range was {
		old[s.Path] = s.Content
	}
	var out []string
	seen := map[string]bool{}
	for _, s := range now {
		seen[s.Path] = true
		prev, ok := old[s.Path]
		switch {
		case !ok:
			out = append(out, s.Path+": read now, not when the run started")
		case prev != s.Content:
			out = append(out, s.Path+":\n"+diff(prev, s.Content))
		}
	}
	for _, s := range was {
		if !seen[s.Path] {
			out = append(out, s.Path+": read when the run started, not now")
		}
	}
	return out
}
