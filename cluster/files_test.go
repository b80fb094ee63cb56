package cluster

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/flowrun/flowrun/dsl"
)

func embeddedNATS(t *testing.T) string {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(20 * time.Second) {
		t.Fatal("the NATS server did not start")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return "nats://" + s.Addr().(*net.TCPAddr).String()
}

// TestPipelineTravelsByHash: a pipeline and the files it loads, uploaded
// by one process, load on a worker with no shared filesystem as the same
// pipeline (same hash); a reference whose hash is not what the files
// load as is refused.
func TestPipelineTravelsByHash(t *testing.T) {
	ctx := context.Background()
	c, err := connect(ctx, Options{URL: embeddedNATS(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.nc.Close()
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
	other.Hash = "0123"
	if _, err := c.fetchPipeline(ctx, cache, other); err == nil || !strings.Contains(err.Error(), "loads with hash "+p.Hash+" on this worker, not 0123") {
		t.Fatalf("a reference whose hash is not the pipeline's: %v, want it refused", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestSafePath(t *testing.T) {
	for path, up := range map[string]int{"p.yaml": 0, "prompts/a.txt": 0, "../shared/x.yaml": 1, "../../y.yaml": 2} {
		if got, err := safePath(path); err != nil || got != up {
			t.Errorf("safePath(%q) = %d, %v; want %d", path, got, err, up)
		}
	}
	for _, path := range []string{"/etc/passwd", "C:/x"} {
		if _, err := safePath(path); err == nil {
			t.Errorf("safePath(%q) accepted", path)
		}
	}
}

func TestDisplayURL(t *testing.T) {
	got := DisplayURL("nats://user:s3cret@a:4222,nats://b:4222")
	if strings.Contains(got, "s3cret") || got != "nats://a:4222,nats://b:4222" {
		t.Fatalf("DisplayURL = %q", got)
	}
}
