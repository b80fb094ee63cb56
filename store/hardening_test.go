package store_test

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// openFile opens a new store and says where its file is.
func openFile(t *testing.T) (*store.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runs.db")
	s, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

// startedRun opens a new store with run r1 and its recorder, which holds
// the run_started event.
func startedRun(t *testing.T) (*store.Store, string, *store.Recorder) {
	t.Helper()
	s, path := openFile(t)
	newRun(t, s, "r1")
	rec, err := s.Recorder(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	rec.Event(runtime.Event{Type: runtime.EventRunStarted, Run: "r1"})
	return s, path, rec
}

// TestLostFileRefusesWrites: once the database file is truncated, deleted
// or replaced under an open store, a recorder's commit and Finish fail
// with *store.LostError naming the file, and keep failing.
func TestLostFileRefusesWrites(t *testing.T) {
	ctx := context.Background()
	for _, damage := range []string{"truncated", "deleted", "replaced"} {
		t.Run(damage, func(t *testing.T) {
			s, path, rec := startedRun(t)
			if err := rec.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			var err error
			switch damage {
			case "truncated":
				err = os.Truncate(path, 0)
			case "deleted":
				err = os.Remove(path)
			case "replaced":
				if err = os.Rename(path, path+".old"); err == nil {
					err = os.WriteFile(path, []byte("not a database"), 0o644)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			rec.Event(runtime.Event{Type: runtime.EventNodeFinished, Run: "r1", Path: "a"})
			var lost *store.LostError
			if err := rec.Flush(ctx); !errors.As(err, &lost) || lost.Path != path {
				t.Fatalf("flush after the file was %s: %v", damage, err)
			}
			if err := s.Finish(ctx, "r1", store.Ending{Status: runtime.StatusCompleted}); !errors.As(err, &lost) {
				t.Fatalf("finish after the file was %s: %v", damage, err)
			}
		})
	}
}

// TestLongStringsStoredOnce: a long string held by two events and two
// checkpoints (at any depth, under any key) is stored once and read back
// whole, numbers as they were; a fork shares it; it goes when the last
// run that holds it is pruned. A short string that says "$shared" is
// left alone.
func TestLongStringsStoredOnce(t *testing.T) {
	ctx := context.Background()
	s, path := openFile(t)
	newRun(t, s, "r1")
	long := strings.Repeat("0123456789abcdef", 4096) // 64 KiB
	out := map[string]any{"stdout": long, "n": 7, "odd key.with[dots]": []any{"short", long, 2.5}, "note": `"$shared"`}
	rec, err := s.Recorder(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	rec.Event(runtime.Event{Type: runtime.EventSandboxRun, Run: "r1", Path: "a", Output: out})
	if err := rec.Save(ctx, &runtime.Checkpoint{Path: "a", Output: out}); err != nil {
		t.Fatal(err)
	}
	rec.Event(runtime.Event{Type: runtime.EventNodeFinished, Run: "r1", Path: "a", Output: out})
	if err := rec.Save(ctx, &runtime.Checkpoint{Path: "loop", Output: []any{out}, Nodes: map[string]any{"a": out}}); err != nil {
		t.Fatal(err)
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, "r1", store.Ending{Status: runtime.StatusCompleted}); err != nil {
		t.Fatal(err)
	}
	events, err := s.Events(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	cps, err := s.Checkpoints(ctx, "r1", 0)
	if err != nil {
		t.Fatal(err)
	}
	wantEvent := map[string]any{"stdout": long, "n": 7.0, "odd key.with[dots]": []any{"short", long, 2.5}, "note": `"$shared"`}
	if len(events) != 2 || !reflect.DeepEqual(events[0].Output, wantEvent) || !reflect.DeepEqual(events[1].Output, wantEvent) {
		t.Fatalf("events read back differ: %d events", len(events))
	}
	if len(cps) != 2 || !reflect.DeepEqual(cps[0].Output, out) || !reflect.DeepEqual(cps[1].Output, []any{out}) || !reflect.DeepEqual(cps[1].Nodes["a"], out) {
		t.Fatalf("checkpoints read back differ: %d checkpoints", len(cps))
	}

	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func(q string) int {
		t.Helper()
		var n int
		if err := db.QueryRow(q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(`SELECT COUNT(*) FROM shared_values`); n != 1 {
		t.Fatalf("%d shared values, want 1", n)
	}
	if n := count(`SELECT COALESCE(SUM(LENGTH(data)), 0) FROM events`) + count(`SELECT SUM(LENGTH(data)) FROM checkpoints`); n > len(long) {
		t.Fatalf("the events and checkpoints hold %d bytes: the long string is repeated", n)
	}

	child := &store.Run{ID: "r2", Pipeline: "p.yaml", PipelineAbs: "/x/p.yaml", PipelineName: "p", PipelineHash: "h", PipelineSrc: "src"}
	if err := s.Fork(ctx, "r1", 2, child); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, "r2", store.Ending{Status: runtime.StatusCompleted}); err != nil {
		t.Fatal(err)
	}
	rw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if _, err := rw.Exec(`UPDATE runs SET started_at = '2000-01-01T00:00:00Z' WHERE id = 'r1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prune(ctx, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if cps, err := s.Checkpoints(ctx, "r2", 0); err != nil || len(cps) != 2 || !reflect.DeepEqual(cps[0].Output, out) {
		t.Fatalf("the fork lost the shared string when its parent was pruned: %v", err)
	}
	if n := count(`SELECT COUNT(*) FROM shared_values`); n != 1 {
		t.Fatalf("%d shared values after pruning the parent, want 1", n)
	}
	if _, err := s.Prune(ctx, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n := count(`SELECT COUNT(*) FROM shared_values`); n != 0 {
		t.Fatalf("%d shared values after pruning every run, want 0", n)
	}
}

// TestOpenReadOnly: a read-only store reads runs, events and checkpoints
// and refuses writes; a missing file is fs.ErrNotExist, and nothing is
// created. (TestHardening13RunsReadOnlyStore in cmd/flowrun reads a store
// in a directory the reader may not write, where SQLite cannot make the
// WAL index.)
func TestOpenReadOnly(t *testing.T) {
	ctx := context.Background()
	s, path, rec := startedRun(t)
	if err := rec.Save(ctx, &runtime.Checkpoint{Path: "a", Output: 1}); err != nil {
		t.Fatal(err)
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()

	ro, err := store.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	runs, err := ro.Runs(ctx)
	if err != nil || len(runs) != 1 || runs[0].ID != "r1" {
		t.Fatalf("runs %v, %v", runs, err)
	}
	events, err := ro.Events(ctx, "r1")
	if err != nil || len(events) != 1 {
		t.Fatalf("events %v, %v", events, err)
	}
	cps, err := ro.Checkpoints(ctx, "r1", 0)
	if err != nil || len(cps) != 1 || cps[0].Output != 1 {
		t.Fatalf("checkpoints %v, %v", cps, err)
	}
	if err := ro.Finish(ctx, "r1", store.Ending{Status: runtime.StatusFailed}); err == nil {
		t.Fatal("a read-only store wrote")
	}

	missing := filepath.Join(t.TempDir(), "none", "runs.db")
	if _, err := store.OpenReadOnly(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing store: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(missing)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("opening a missing store read-only created its directory")
	}
}
