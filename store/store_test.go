package store_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

func open(t testing.TB) *store.Store {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "sub", "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newRun(t testing.TB, s *store.Store, id string) {
	t.Helper()
	err := s.CreateRun(context.Background(), &store.Run{ID: id, Pipeline: "p.yaml", PipelineAbs: "/x/p.yaml", PipelineName: "p",
		PipelineHash: "h", PipelineSrc: "src", Inputs: map[string]any{"n": 1}})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpenMigratesOnceAndReopens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.db")
	s, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	newRun(t, s, "r1")
	s.Close()
	s, err = store.Open(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	r, err := s.Run(context.Background(), "r1")
	if err != nil || r.Inputs["n"] != 1 || r.Status != runtime.StatusRunning {
		t.Fatalf("run %+v err %v", r, err)
	}
	db, _ := sql.Open("sqlite", path)
	defer db.Close()
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal mode %q, want wal (%v)", mode, err)
	}
}

func TestNewerSchemaIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.db")
	s, _ := store.Open(path)
	s.Close()
	db, _ := sql.Open("sqlite", path)
	if _, err := db.Exec(`UPDATE schema_version SET version = 99`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := store.Open(path); err == nil {
		t.Fatal("a database from a newer flowrun must not be opened")
	}
}

func TestUnknownRunSuggests(t *testing.T) {
	s := open(t)
	newRun(t, s, "20261122T000000-abcd1234")
	_, err := s.Run(context.Background(), "abcd12")
	if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "did you mean 20261122T000000-abcd1234") {
		t.Fatalf("err %v", err)
	}
}

func TestCheckpointsEventsAndRollback(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	newRun(t, s, "r")
	rec, err := s.Recorder(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 4; i++ {
		rec.Event(runtime.Event{Type: runtime.EventNodeStarted, Path: "n"})
		if err := rec.Save(ctx, &runtime.Checkpoint{Path: "n" + string(rune('0'+i)), Output: i, State: map[string]any{"k": i}}); err != nil {
			t.Fatal(err)
		}
	}
	rec.Event(runtime.Event{Type: runtime.EventRunFinished})
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	events, _ := s.Events(ctx, "r")
	if len(events) != 5 || events[4].Type != runtime.EventRunFinished {
		t.Fatalf("%d events", len(events))
	}
	cps, _ := s.Checkpoints(ctx, "r", 0)
	if len(cps) != 4 || cps[3].Seq != 4 || cps[3].Output != 4 || cps[3].State["k"] != 4 {
		t.Fatalf("checkpoints %+v", cps)
	}
	if err := s.Finish(ctx, "r", store.Ending{Status: runtime.StatusCompleted}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot(ctx, "r", "two"); err != nil {
		t.Fatal(err)
	}
	// Take the snapshot at 4, roll back to checkpoint 2 by number.
	snap, err := s.Rollback(ctx, "r", "2")
	if err != nil || snap.Seq != 2 || snap.Kind != store.KindRollback {
		t.Fatalf("rollback %+v %v", snap, err)
	}
	cps, _ = s.Checkpoints(ctx, "r", 0)
	if len(cps) != 2 {
		t.Fatalf("%d current checkpoints after rollback to 2", len(cps))
	}
	// New checkpoints continue after the discarded ones: history is kept.
	rec, _ = s.Recorder(ctx, "r")
	cp := &runtime.Checkpoint{Path: "again"}
	if err := rec.Save(ctx, cp); err != nil || cp.Seq != 5 {
		t.Fatalf("seq %d err %v", cp.Seq, err)
	}
	if seq, err := s.Point(ctx, "r", "two"); err != nil || seq != 4 {
		t.Fatalf("snapshot two: %d %v (snapshots are immutable)", seq, err)
	}
	if _, err := s.Point(ctx, "r", "nope"); !errors.Is(err, store.ErrNoSnapshot) {
		t.Fatalf("err %v", err)
	}
}

func TestClaimAndFinish(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	newRun(t, s, "r")
	// This process holds it; claiming again (a resume in the same process) works.
	if _, err := s.Claim(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, "r", store.Ending{Status: runtime.StatusFailed, Error: "boom", Steps: 3}); err != nil {
		t.Fatal(err)
	}
	r, _ := s.Run(ctx, "r")
	if r.Status != runtime.StatusFailed || r.Error != "boom" || r.PID != 0 || r.Finished.IsZero() {
		t.Fatalf("%+v", r)
	}
}

func TestPrune(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	newRun(t, s, "old")
	_ = s.Finish(ctx, "old", store.Ending{Status: runtime.StatusCompleted})
	newRun(t, s, "live")
	n, err := s.Prune(ctx, time.Now().Add(time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("pruned %d, %v: a running run is kept", n, err)
	}
	if _, err := s.Run(ctx, "old"); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("pruned run still there")
	}
}

func TestDefaultPath(t *testing.T) {
	t.Setenv("FLOWRUN_STORE", "")
	os.Unsetenv("FLOWRUN_STORE")
	if store.DefaultPath() != filepath.Join(".flowrun", "flowrun.db") {
		t.Fatal(store.DefaultPath())
	}
	t.Setenv("FLOWRUN_STORE", "/tmp/x.db")
	if store.DefaultPath() != "/tmp/x.db" {
		t.Fatal(store.DefaultPath())
	}
}

// TestOpenNewDatabaseConcurrently: several openers of one new database
// (as two flowrun processes started together) all succeed.
func TestOpenNewDatabaseConcurrently(t *testing.T) {
	for round := range 10 {
		path := filepath.Join(t.TempDir(), "runs.db")
		errs := make(chan error, 8)
		for range 8 {
			go func() {
				s, err := store.Open(path)
				if err == nil {
					s.Close()
				}
				errs <- err
			}()
		}
		for range 8 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}
