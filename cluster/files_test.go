package cluster

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/internal/natstest"
)

func embeddedNATS(t *testing.T) string {
	t.Helper()
	s := natstest.Start(t, &server.Options{JetStream: true, StoreDir: t.TempDir()})
	return "nats://" + s.Addr().(*net.TCPAddr).String()
}

// TestPipelineTravelsByHash: a pipeline and the files it loads, uploaded
// by one process, load on a worker with no shared filesystem as the same
// pipeline (same hash); a reference whose hash is not what the files
// load as is refused.
func TestPipelineTravelsByHash(t *testing.T) {
	ctx := context.Background()
	c := testConn(t, Options{URL: embeddedNATS(t)})
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "code"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "code", "check.py"), []byte("def f():\n    return 1\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(`
version: 1
name: p
nodes:
  - id: c
    code: {language: python, source: {file: code/check.py}, call: f}
`), 0o644))
	p, ds := dsl.Load(filepath.Join(dir, "p.yaml"))
	if p == nil {
		t.Fatal(ds)
	}
	ref, err := c.uploadPipeline(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(ref.Files) != 2 {
		t.Fatalf("uploaded %d files, want the pipeline and code/check.py: %+v", len(ref.Files), ref.Files)
	}
	cache := t.TempDir()
	got, err := c.fetchPipeline(ctx, cache, ref)
	if err != nil {
		t.Fatal(err)
	}
	if got.Hash != p.Hash || !strings.HasPrefix(got.Path, cache) {
		t.Fatalf("loaded %s with hash %s, want a copy under %s with hash %s", got.Path, got.Hash, cache, p.Hash)
	}

	other := ref
	other.Hash = strings.Repeat("0", 64)
	if _, err := c.fetchPipeline(ctx, cache, other); err == nil || !strings.Contains(err.Error(), "loads with hash "+p.Hash+" on this worker, not "+other.Hash) {
		t.Fatalf("a reference whose hash is not the pipeline's: %v, want it refused", err)
	}
}

// testConn connects as o says; the connection closes when the test ends.
func testConn(t *testing.T, o Options) *conn {
	t.Helper()
	c, err := connect(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.nc.Close)
	return c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestPipelineRefCheck: a job's hash, file names and pipeline file name
// are refused when they could lead a worker out of its cache directory.
func TestPipelineRefCheck(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	object := "sha256-" + hash
	good := PipelineRef{Hash: hash, Main: "p.yaml", Files: []FileRef{{Path: "p.yaml", Object: object}, {Path: "prompts/a.md", Object: object}}}
	if err := good.check(); err != nil {
		t.Fatalf("a good reference: %v", err)
	}
	for name, bad := range map[string]func(r *PipelineRef){
		"hash ../x":             func(r *PipelineRef) { r.Hash = "../x" },
		"hash too short":        func(r *PipelineRef) { r.Hash = hash[:10] },
		"hash upper case":       func(r *PipelineRef) { r.Hash = strings.ToUpper(hash) },
		"main ../../secret":     func(r *PipelineRef) { r.Main = "../../secret.yaml" },
		"main absolute":         func(r *PipelineRef) { r.Main = "/etc/passwd" },
		"main not a job file":   func(r *PipelineRef) { r.Main = "other.yaml" },
		"file ../x":             func(r *PipelineRef) { r.Files = append(r.Files, FileRef{Path: "../x", Object: object}) },
		"file a/../../x":        func(r *PipelineRef) { r.Files = append(r.Files, FileRef{Path: "a/../../x", Object: object}) },
		"file absolute":         func(r *PipelineRef) { r.Files = append(r.Files, FileRef{Path: "/tmp/x", Object: object}) },
		"file with a backslash": func(r *PipelineRef) { r.Files = append(r.Files, FileRef{Path: `..\x`, Object: object}) },
		"object ../x":           func(r *PipelineRef) { r.Files[1].Object = "../x" },
	} {
		r := good
		r.Files = append([]FileRef(nil), good.Files...)
		bad(&r)
		if err := r.check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestDisplayURL(t *testing.T) {
	got := DisplayURL("nats://user:s3cret@a:4222,nats://b:4222")
	if strings.Contains(got, "s3cret") || got != "nats://a:4222,nats://b:4222" {
		t.Fatalf("DisplayURL = %q", got)
	}
}

// TestFetchStaysInCache: a job whose hash or pipeline file name leads out
// of the worker's cache writes nothing outside it and reads nothing
// outside it: a file beside the cache never shows in the error.
func TestFetchStaysInCache(t *testing.T) {
	ctx := context.Background()
	c := testConn(t, Options{URL: embeddedNATS(t)})
	base := t.TempDir()
	cache := filepath.Join(base, "a", "cache")
	must(t, os.MkdirAll(cache, 0o700))
	must(t, os.WriteFile(filepath.Join(base, "a", "secret.yaml"), []byte("api_key: sk-TOPSECRET-123\n"), 0o600))
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "p.yaml"), []byte("version: 1\nname: p\nnodes:\n  - id: s\n    set: {}\n"), 0o644))
	p, ds := dsl.Load(filepath.Join(dir, "p.yaml"))
	if p == nil {
		t.Fatal(ds)
	}
	ref, err := c.uploadPipeline(ctx, p)
	if err != nil {
		t.Fatal(err)
	}

	escape := ref
	escape.Hash = "../escape"
	if _, err := c.fetchPipeline(ctx, cache, escape); err == nil {
		t.Error("a job with hash ../escape was fetched")
	}
	if _, err := os.Stat(filepath.Join(base, "a", "escape")); err == nil {
		t.Error("a job with hash ../escape wrote outside the worker's cache")
	}

	secret := ref
	secret.Main = "../../secret.yaml"
	_, err = c.fetchPipeline(ctx, cache, secret)
	if err == nil || strings.Contains(err.Error(), "TOPSECRET") {
		t.Errorf("a job whose pipeline file is ../../secret.yaml: %v", err)
	}
}

// TestWorkerCacheDirDefault: a worker given no cache directory keeps the
// pipelines it fetches under the user's cache directory, decided before
// it connects.
func TestWorkerCacheDirDefault(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	w := &Worker{Options: Options{URL: "nats://127.0.0.1:1", Insecure: true}, Log: io.Discard}
	if err := w.Run(context.Background()); err == nil {
		t.Fatal("a worker ran with no server to reach")
	}
	if want := filepath.Join(cache, "flowrun", "worker-pipelines"); w.CacheDir != want {
		t.Errorf("cache directory %q, want %q", w.CacheDir, want)
	}
}

// TestPoisonedFileUploadedAside: a file put into the object store first
// by someone else, under the content hash of a coordinator's pipeline
// file but with other content, does not fail the coordinator's items: its
// upload finds the name taken by other content, says so, and puts the
// file under a name of its own, from which the worker loads the same
// pipeline; the poisoned object itself is refused by its hash.
func TestPoisonedFileUploadedAside(t *testing.T) {
	ctx := context.Background()
	url := embeddedNATS(t)
	c := testConn(t, Options{URL: url})
	var lines []string
	c.refused = &refusals{log: func(l string) { lines = append(lines, l) }}
	dir := t.TempDir()
	src := "version: 1\nname: p\nnodes:\n  - id: s\n    set: {}\n"
	must(t, os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(src), 0o644))
	p, ds := dsl.Load(filepath.Join(dir, "p.yaml"))
	if p == nil {
		t.Fatal(ds)
	}
	attacker := testConn(t, Options{URL: url})
	_, err := attacker.files.PutString(ctx, objectName([]byte(src)), "version: 1\nname: poisoned\nnodes: []\n")
	must(t, err)

	ref, err := c.uploadPipeline(ctx, p)
	must(t, err)
	if len(lines) != 1 || !strings.Contains(lines[0], "holds other content") {
		t.Errorf("reported %q, want the taken name said", lines)
	}
	got, err := c.fetchPipeline(ctx, t.TempDir(), ref)
	if err != nil {
		t.Fatalf("the worker could not load the pipeline uploaded aside: %v", err)
	}
	if got.Hash != p.Hash {
		t.Errorf("loaded hash %s, want %s", got.Hash, p.Hash)
	}
	poisoned := ref
	poisoned.Files = []FileRef{{Path: "p.yaml", Object: objectName([]byte(src))}}
	if _, err := c.fetchPipeline(ctx, t.TempDir(), poisoned); err == nil || !strings.Contains(err.Error(), "does not match its hash") {
		t.Errorf("fetching the poisoned object: %v, want it refused", err)
	}
}
