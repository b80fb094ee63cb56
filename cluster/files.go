package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/internal/confined"
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
		if err := checkName(s.Path); err != nil {
			return ref, fmt.Errorf("pipeline file %s: %w", s.Path, err)
		}
		name := objectName([]byte(s.Content))
		err := retry(ctx, "uploading "+s.Path+" to the JetStream object store", func(ctx context.Context) error {
			var err error
			name, err = c.upload(ctx, []byte(s.Content))
			return err
		})
		if err != nil {
			return ref, err
		}
		ref.Files = append(ref.Files, FileRef{Path: s.Path, Object: name})
	}
	return ref, nil
}

// upload puts data into the object store under its hash, unless an
// object with that content is there already, and returns the object's
// name. When the name holds other content (someone else on the account
// put it there first), data goes under a name of its own, its hash with
// a random suffix, which workers check as they check any object.
func (c *conn) upload(ctx context.Context, data []byte) (string, error) {
	name := objectName(data)
	sum := sha256.Sum256(data)
	digest := "SHA-256=" + base64.URLEncoding.EncodeToString(sum[:])
	info, err := c.files.GetInfo(ctx, name)
	switch {
	case err == nil && info.Digest == digest && info.Size == uint64(len(data)):
		return name, nil
	case err == nil:
		c.refused.report("files", fmt.Sprintf("the object %s holds other content; uploading the file under a name of its own", name))
		name += "." + nuid.Next()
	case !errors.Is(err, jetstream.ErrObjectNotFound):
		return "", err
	}
	_, err = c.files.PutBytes(ctx, name, data)
	return name, err
}

func objectName(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256-" + hex.EncodeToString(sum[:])
}

var (
	hexHash = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// An object's name is the hash of its content, with a suffix when
	// that name was taken by other content.
	objectHash = regexp.MustCompile(`^sha256-[0-9a-f]{64}(\.[0-9A-Za-z]{1,32})?$`)
)

// checkName accepts a file name that stays in the pipeline's directory:
// relative, slash-separated, clean, with no ".." step.
func checkName(name string) error {
	if name == "" || path.Clean(name) != name || strings.Contains(name, "\\") || !filepath.IsLocal(filepath.FromSlash(name)) || !fs.ValidPath(name) {
		return fmt.Errorf("%q is not a clean relative path inside the pipeline's directory", name)
	}
	return nil
}

// check refuses a reference whose names could lead a worker's writes or
// reads out of its cache directory: the hash names a directory there, the
// files and the pipeline file are names inside it, and the pipeline file
// is one of the files.
func (ref PipelineRef) check() error {
	if !hexHash.MatchString(ref.Hash) {
		return fmt.Errorf("job: the pipeline hash %q is not 64 lowercase hex digits", ref.Hash)
	}
	main := false
	for _, f := range ref.Files {
		if err := checkName(f.Path); err != nil {
			return fmt.Errorf("job: pipeline file: %w", err)
		}
		if !objectHash.MatchString(f.Object) {
			return fmt.Errorf("job: pipeline file %s: the object name %q is not sha256-<64 hex digits>[.<suffix>]", f.Path, f.Object)
		}
		main = main || f.Path == ref.Main
	}
	if err := checkName(ref.Main); err != nil {
		return fmt.Errorf("job: the pipeline file: %w", err)
	}
	if !main {
		return fmt.Errorf("job: the pipeline file %q is not among the job's files", ref.Main)
	}
	return nil
}

// fetchPipeline rebuilds a pipeline's files under dir/<hash> (once per
// hash) and loads it from there. A file whose content does not match its
// hash is refused; every write and read stays inside dir.
func (c *conn) fetchPipeline(ctx context.Context, dir string, ref PipelineRef) (*dsl.Pipeline, error) {
	if err := ref.check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("making the pipeline cache: %w", err)
	}
	cache, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening the pipeline cache: %w", err)
	}
	defer cache.Close()
	complete := path.Join(ref.Hash, ".complete")
	if _, err := cache.Stat(complete); err != nil {
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
			if hash, _, _ := strings.Cut(f.Object, "."); objectName(data) != hash {
				return nil, fmt.Errorf("pipeline file %s: its content does not match its hash %s", f.Path, f.Object)
			}
			file := path.Join(ref.Hash, f.Path)
			if err := cache.MkdirAll(path.Dir(file), 0o700); err != nil {
				return nil, fmt.Errorf("pipeline file %s: %w", f.Path, err)
			}
			if err := cache.WriteFile(file, data, 0o600); err != nil {
				return nil, fmt.Errorf("pipeline file %s: %w", f.Path, err)
			}
		}
		if err := cache.WriteFile(complete, nil, 0o600); err != nil {
			return nil, fmt.Errorf("pipeline %s: %w", ref.Hash, err)
		}
	}
	root, err := filepath.Abs(filepath.Join(dir, ref.Hash))
	if err != nil {
		return nil, err
	}
	files := confined.Dir{Root: root, MaxBytes: dsl.DefaultMaxFileBytes}
	src, err := files.ReadFile(ctx, ref.Main)
	if err != nil {
		return nil, fmt.Errorf("pipeline %s (hash %s): %w", ref.Main, ref.Hash, err)
	}
	p, ds := dsl.LoadSource(filepath.Join(root, filepath.FromSlash(ref.Main)), src)
	if p == nil {
		return nil, fmt.Errorf("pipeline %s (hash %s) does not load on this worker:\n%s", ref.Main, ref.Hash, ds)
	}
	if p.Hash != ref.Hash {
		return nil, fmt.Errorf("pipeline %s loads with hash %s on this worker, not %s: it reads a file the coordinator did not send", ref.Main, p.Hash, ref.Hash)
	}
	return p, nil
}
