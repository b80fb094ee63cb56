package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/flowrun/flowrun/dsl"
)

// PipelineRef names a pipeline's files by content hash: what a worker
// needs to load the same pipeline the coordinator loaded.
type PipelineRef struct {
	Hash  string    `json:"hash"` // dsl.Pipeline.Hash
	Main  string    `json:"main"` // the pipeline file, among Files
	Files []FileRef `json:"files"`
}

// FileRef is one file a pipeline's load read.
type FileRef struct {
	Path   string `json:"path"`   // relative to the pipeline's directory, slash-separated
	Object string `json:"object"` // its name in the files object store: sha256-<hex>
}

// uploadPipeline puts every file p's load read into the object store,
// skipping those already there.
func (c *conn) uploadPipeline(ctx context.Context, p *dsl.Pipeline) (PipelineRef, error) {
	ref := PipelineRef{Hash: p.Hash, Main: filepath.ToSlash(filepath.Base(p.Path))}
	for _, s := range p.Sources {
		if _, err := safePath(s.Path); err != nil {
			return ref, err
		}
		sum := sha256.Sum256([]byte(s.Content))
		name := "sha256-" + hex.EncodeToString(sum[:])
		err := retry(ctx, "uploading "+s.Path+" to the JetStream object store", func(ctx context.Context) error {
			if _, err := c.files.GetInfo(ctx, name); err == nil {
				return nil
			} else if !errors.Is(err, jetstream.ErrObjectNotFound) {
				return err
			}
			_, err := c.files.PutString(ctx, name, s.Content)
			return err
		})
		if err != nil {
			return ref, err
		}
		ref.Files = append(ref.Files, FileRef{Path: s.Path, Object: name})
	}
	return ref, nil
}

// safePath checks that a source path is relative and returns how many
// ".." steps lead it out of the pipeline's directory (a file beside it):
// fetchPipeline adds as many levels below its root.
func safePath(p string) (int, error) {
	clean := path.Clean(p)
	if path.IsAbs(clean) || filepath.IsAbs(p) || strings.Contains(clean, ":") {
		return 0, fmt.Errorf("pipeline file %s: a worker cannot rebuild a path outside the pipeline's tree; keep the files it loads in or under a common directory", p)
	}
	up := 0
	for strings.HasPrefix(clean, "../") {
		clean = clean[3:]
		up++
	}
	return up, nil
}

// fetchPipeline rebuilds a pipeline's files under dir (once per pipeline
// hash) and loads it. A file whose content does not match its hash is
// refused.
func (c *conn) fetchPipeline(ctx context.Context, dir string, ref PipelineRef) (*dsl.Pipeline, error) {
	depth := 0
	for _, f := range ref.Files {
		up, err := safePath(f.Path)
		if err != nil {
			return nil, err
		}
		depth = max(depth, up)
	}
	root := filepath.Join(dir, ref.Hash)
	for range depth {
		root = filepath.Join(root, "_")
	}
	main := filepath.Join(root, filepath.FromSlash(ref.Main))
	if _, err := os.Stat(filepath.Join(dir, ref.Hash, ".complete")); err != nil {
		for _, f := range ref.Files {
			var data []byte
			err := retry(ctx, "fetching "+f.Path+" from the JetStream object store", func(ctx context.Context) error {
				var err error
				data, err = c.files.GetBytes(ctx, f.Object)
				return err
			})
			if err != nil {
				return nil, err
			}
			sum := sha256.Sum256(data)
			if "sha256-"+hex.EncodeToString(sum[:]) != f.Object {
				return nil, fmt.Errorf("pipeline file %s: its content does not match its hash %s", f.Path, f.Object)
			}
			file := filepath.Join(root, filepath.FromSlash(f.Path))
			if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
				return nil, err
			}
			if err := os.WriteFile(file, data, 0o600); err != nil {
				return nil, err
			}
		}
		if err := os.WriteFile(filepath.Join(dir, ref.Hash, ".complete"), nil, 0o600); err != nil {
			return nil, err
		}
	}
	p, ds := dsl.Load(main)
	if p == nil {
		return nil, fmt.Errorf("pipeline %s (hash %s) does not load on this worker:\n%s", ref.Main, ref.Hash, ds)
	}
	if p.Hash != ref.Hash {
		return nil, fmt.Errorf("pipeline %s loads with hash %s on this worker, not %s: it reads a file the coordinator did not send", ref.Main, p.Hash, ref.Hash)
	}
	return p, nil
}
