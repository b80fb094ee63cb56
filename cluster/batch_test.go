package cluster

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/store"
)

// TestDriveBatchWindow: a runner driven over NATS sends its items to the
// coordinator, at most the window at once, or every item when there is
// no window; a server that cannot be reached is an error and leaves the
// runner local.
func TestDriveBatchWindow(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "p.yaml"), []byte("version: 1\nname: p\nnodes:\n  - id: s\n    set: {}\n"), 0o644))
	p, ds := dsl.Load(filepath.Join(dir, "p.yaml"))
	if p == nil {
		t.Fatal(ds)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "flowrun.db"))
	must(t, err)
	defer st.Close()
	url := embeddedNATS(t)
	for _, c := range []struct{ items, window, want int }{{5, 0, 5}, {5, 2, 2}, {0, 0, 1}} {
		r := &batch.Runner{Store: st, Pipeline: p}
		co, err := DriveBatch(context.Background(), r, Options{URL: url, Insecure: true}, c.items, c.window, false, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if r.Concurrency != c.want || r.Remote == nil || r.Halt == nil {
			t.Errorf("%d items, window %d: concurrency %d (want %d), remote set %v", c.items, c.window, r.Concurrency, c.want, r.Remote != nil)
		}
		co.Close()
	}
	r := &batch.Runner{Store: st, Pipeline: p}
	if _, err := DriveBatch(context.Background(), r, Options{URL: "nats://127.0.0.1:1", Insecure: true}, 3, 0, false, io.Discard); err == nil || r.Remote != nil {
		t.Errorf("an unreachable server: %v, remote set %v", err, r.Remote != nil)
	}
}
