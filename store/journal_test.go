package store

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/flowrun/flowrun/runtime"
)

func TestJournalReadStopsAtDamage(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	j, err := s.openJournal("r")
	if err != nil {
		t.Fatal(err)
	}
	want := []pendingCheckpoint{
		{seq: 1, path: "a", data: `{"seq":1}`, created: "t1"},
		{seq: 2, path: "b[1]/c", data: `{"seq":2,"output":"é"}`, created: "t2"},
	}
	if err := j.append(want[:1]); err != nil {
		t.Fatal(err)
	}
	if err := j.append(want[1:]); err != nil {
		t.Fatal(err)
	}
	if err := j.abandon(); err != nil {
		t.Fatal(err)
	}
	got, err := readJournal(j.path)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("read %+v, %v; want %+v", got, err, want)
	}
	b, _ := os.ReadFile(j.path)
	// A write cut short by a kill, and a record damaged on disk: reading
	// stops before them.
	for _, bad := range [][]byte{b[:len(b)-3], append(append([]byte{}, b...), 40, 0, 0, 0, 1, 2)} {
		if err := os.WriteFile(j.path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := readJournal(j.path)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(bad) - len(b); n < 0 && !reflect.DeepEqual(got, want[:1]) || n > 0 && !reflect.DeepEqual(got, want) {
			t.Fatalf("damaged journal (%+d bytes) read as %+v", n, got)
		}
	}
	flipped := append([]byte{}, b...)
	flipped[len(flipped)-1] ^= 1
	if err := os.WriteFile(j.path, flipped, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := readJournal(j.path); !reflect.DeepEqual(got, want[:1]) {
		t.Fatalf("a record with a bad checksum was read: %+v", got)
	}
}

func TestSettleMovesInDeadJournalsOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(filepath.Join(dir, "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateRun(ctx, &Run{ID: "r", Pipeline: "p.yaml", PipelineAbs: "/p.yaml", PipelineName: "p", PipelineHash: "h"}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Recorder(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Save(ctx, &runtime.Checkpoint{Path: "x1"}); err != nil {
		t.Fatal(err)
	}
	// The recorder is alive: its journal is its own to move in.
	cps, err := s.Checkpoints(ctx, "r", 0)
	if err != nil || len(cps) != 0 {
		t.Fatalf("%d checkpoints, %v: a live journal was moved in by a reader", len(cps), err)
	}
	// A journal of the same run by a process that is gone.
	dead := filepath.Join(journalDir(s.Path()), "r.2147483646.123.0000abcd.log")
	j := &journalFile{path: dead}
	if j.f, err = os.Create(dead); err != nil {
		t.Fatal(err)
	}
	if _, err := j.f.Write([]byte(journalMagic)); err != nil {
		t.Fatal(err)
	}
	if err := j.append([]pendingCheckpoint{{seq: 7, path: "old", data: `{"seq":7,"path":"old","steps":0}`, created: now()}}); err != nil {
		t.Fatal(err)
	}
	j.f.Close()
	cps, err = s.Checkpoints(ctx, "r", 0)
	if err != nil || len(cps) != 1 || cps[0].Path != "old" {
		t.Fatalf("checkpoints %v, %v: want the dead journal's", cps, err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Fatalf("the dead journal is still there after being moved in: %v", err)
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cps, _ = s.Checkpoints(ctx, "r", 0)
	var paths []string
	for _, cp := range cps {
		paths = append(paths, cp.Path)
	}
	if !reflect.DeepEqual(paths, []string{"x1", "old"}) {
		t.Fatalf("after Flush: %v", paths)
	}
	if left, _ := os.ReadDir(journalDir(s.Path())); len(left) != 0 {
		t.Fatalf("%d journals left after Flush", len(left))
	}
}

func TestJournalNames(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"20261122T001702-c3c44fbf", "a.b/c d", "r"} {
		j, err := s.openJournal(id)
		if err != nil {
			t.Fatal(err)
		}
		got, pid, _, ok := journalName(filepath.Base(j.path))
		if !ok || got != id || pid != os.Getpid() {
			t.Errorf("journal %s: run %q pid %d ok %v, want %q", j.path, got, pid, ok, id)
		}
		if gone(j.path, pid, "") {
			t.Errorf("an open journal of this process counts as gone")
		}
		if err := j.remove(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPruneDropsJournals(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateRun(ctx, &Run{ID: "old", Pipeline: "p.yaml", PipelineAbs: "/p.yaml", PipelineName: "p", PipelineHash: "h"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, "old", Ending{Status: runtime.StatusCompleted}); err != nil {
		t.Fatal(err)
	}
	j, err := s.openJournal("old")
	if err != nil {
		t.Fatal(err)
	}
	if err := j.abandon(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Prune(ctx, time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	if _, err := os.Stat(j.path); !os.IsNotExist(err) {
		t.Fatalf("the pruned run's journal is still there: %v", err)
	}
}
