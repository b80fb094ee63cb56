package store_test

import (
	"context"
	"database/sql"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// effects stands for a tool with effects outside the run: it counts its
// calls by path, and calls hook (when set) before doing anything.
type effects struct {
	mu    sync.Mutex
	calls map[string]int
	hook  func(path string)
}

func (e *effects) Execute(_ context.Context, s *runtime.Scope, n *dsl.Node) (runtime.Outcome, error) {
	path := s.Path(n.ID)
	if e.hook != nil {
		e.hook(path)
	}
	e.mu.Lock()
	if e.calls == nil {
		e.calls = map[string]int{}
	}
	e.calls[path]++
	e.mu.Unlock()
	return runtime.Outcome{Output: path}, nil
}

const grouped = `
version: 1
name: grouped
state: {n: 0, log: []}
nodes:
  - id: rounds
    loop:
      max_iterations: 3
      body:
        - id: call
          tool: {name: read_file, args: {path: "${{ loop.iteration }}"}}
        - id: note
          set: {n: state.n + 1}
        - id: route
          branch:
            - when: state.n >= 2
              set: {log: 'concat(state.log, [state.n])'}
              next: continue
  - id: last
    tool: {name: read_file, args: {path: '"end"'}}
outputs: {n: state.n, log: state.log, last: nodes.last}
`

func loadGrouped(t *testing.T) *dsl.Pipeline {
	t.Helper()
	path := filepath.Join(t.TempDir(), "grouped.yaml")
	if err := os.WriteFile(path, []byte(grouped), 0o644); err != nil {
		t.Fatal(err)
	}
	p, ds := dsl.Load(path)
	if p == nil {
		t.Fatal(ds)
	}
	return p
}

// copyFile copies src to dst; a missing src is not an error.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestKillWithPureCheckpointsBuffered takes the files of the store as a
// kill -9 would leave them, at the moment a node with external effects
// starts while pure nodes' checkpoints are still kept back, and resumes
// from them: the pure nodes run again, every external node that was
// checkpointed is not repeated, and the run ends as an uninterrupted one.
func TestKillWithPureCheckpointsBuffered(t *testing.T) {
	ctx := context.Background()
	p := loadGrouped(t)

	// An uninterrupted run, for the outputs.
	plain := &effects{}
	res := runtime.Run(ctx, kindsWith(plain), p, nil, runtime.Options{})
	if res.Status != runtime.StatusCompleted {
		t.Fatalf("%s %v", res.Status, res.Err)
	}
	want := res.Outputs

	dir := t.TempDir()
	s, err := store.Open(filepath.Join(dir, "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	newRun(t, s, "r")
	rec, err := s.Recorder(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	// No timed commit: only external checkpoints (and Flush) commit.
	store.SetGrouping(rec, 1000, time.Hour)
	killed := filepath.Join(t.TempDir(), "runs.db")
	first := &effects{hook: func(path string) {
		if path == "rounds[3]/call" {
			// The kill: the store's files as they are on disk now.
			copyFile(t, s.Path(), killed)
			copyFile(t, s.Path()+"-wal", killed+"-wal")
			journals, _ := os.ReadDir(store.JournalDir(s.Path()))
			if len(journals) == 0 {
				t.Error("no journal while the run is in progress")
			}
			if err := os.MkdirAll(store.JournalDir(killed), 0o755); err != nil {
				t.Fatal(err)
			}
			for _, e := range journals {
				copyFile(t, filepath.Join(store.JournalDir(s.Path()), e.Name()), filepath.Join(store.JournalDir(killed), e.Name()))
			}
		}
	}}
	res = runtime.Run(ctx, kindsWith(first), p, nil, runtime.Options{RunID: "r", Checkpointer: rec, Sink: rec})
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if res.Status != runtime.StatusCompleted || !reflect.DeepEqual(res.Outputs, want) {
		t.Fatalf("%s %v %v", res.Status, res.Err, res.Outputs)
	}

	k, err := store.Open(killed)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	restore, err := k.Checkpoints(ctx, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, cp := range restore {
		paths = append(paths, cp.Path)
	}
	// Stored (journaled, and moved into the database by Checkpoints): the
	// external rounds[2]/call and, with it, the pure checkpoints before it.
	// Lost: rounds[2]/note and rounds[2]/route, kept back when the kill
	// came.
	if stored := []string{"rounds[1]/call", "rounds[1]/note", "rounds[1]/route", "rounds[2]/call"}; !reflect.DeepEqual(paths, stored) {
		t.Fatalf("checkpoints left by the kill: %v, want %v", paths, stored)
	}
	if events, _ := k.Events(ctx, "r"); len(events) != 0 {
		t.Fatalf("%d events stored before the kill; events wait for a timed commit or Flush", len(events))
	}
	if left, _ := os.ReadDir(store.JournalDir(killed)); len(left) != 0 {
		t.Fatalf("%d journals left after their checkpoints were moved into the database", len(left))
	}

	again := &effects{}
	rec2, err := k.Recorder(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	res = runtime.Run(ctx, kindsWith(again), p, nil, runtime.Options{RunID: "r", Checkpointer: rec2, Sink: rec2, Restore: restore})
	if err := rec2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if res.Status != runtime.StatusCompleted || !reflect.DeepEqual(res.Outputs, want) {
		t.Fatalf("resumed: %s %v outputs %v, want %v", res.Status, res.Err, res.Outputs, want)
	}
	if wantCalls := map[string]int{"rounds[3]/call": 1, "last": 1}; !reflect.DeepEqual(again.calls, wantCalls) {
		t.Fatalf("the resume made the external calls %v, want %v", again.calls, wantCalls)
	}
	all, err := k.Checkpoints(ctx, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, cp := range all {
		if cp.Seq != int64(i+1) {
			t.Fatalf("checkpoint %d has seq %d: the resume's checkpoints must follow the stored ones", i, cp.Seq)
		}
	}
	if left, _ := os.ReadDir(store.JournalDir(killed)); len(left) != 0 {
		t.Fatalf("%d journals left after Flush", len(left))
	}
}

// TestGroupedCheckpointsCommit checks when checkpoints become durable and
// when they and the events reach the database: a pure checkpoint is kept
// back until the next external one, which is journaled at once with it;
// the database gets them all after the group delay, at the group's size,
// or at Flush, always in order.
func TestGroupedCheckpointsCommit(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	newRun(t, s, "r")
	rec, err := s.Recorder(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	inDB := func() int {
		t.Helper()
		n := 0
		if err := dbCount(s, "checkpoints", &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	durable := func() int {
		t.Helper()
		d, err := store.Durable(ctx, s, "r")
		if err != nil {
			t.Fatal(err)
		}
		return len(d)
	}
	save := func(path string, pure bool) {
		t.Helper()
		if err := rec.Save(ctx, &runtime.Checkpoint{Path: path, Pure: pure}); err != nil {
			t.Fatal(err)
		}
	}
	events := func() int {
		t.Helper()
		ev, err := s.Events(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		return len(ev)
	}

	// The size of a group.
	store.SetGrouping(rec, 3, time.Hour)
	save("p1", true)
	save("p2", true)
	if n, d := inDB(), durable(); n != 0 || d != 0 {
		t.Fatalf("%d checkpoints in the database, %d durable; want the pure ones kept back", n, d)
	}
	save("p3", true)
	if n := inDB(); n != 3 {
		t.Fatalf("%d checkpoints in the database once the group is full, want 3", n)
	}

	// An external checkpoint makes those kept back before it durable.
	save("p4", true)
	rec.Event(runtime.Event{Type: runtime.EventNodeFinished, Path: "p4"})
	save("x5", false)
	if n, d := inDB(), durable(); n != 3 || d != 5 {
		t.Fatalf("after an external checkpoint: %d in the database, %d durable; want 3 and 5", n, d)
	}
	if n := events(); n != 0 {
		t.Fatalf("%d events stored with an external checkpoint; they wait for a timed commit", n)
	}

	// Flush moves everything in.
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n, e := inDB(), events(); n != 5 || e != 1 {
		t.Fatalf("after Flush: %d checkpoints and %d events in the database, want 5 and 1", n, e)
	}

	// The delay, for checkpoints and events.
	store.SetGrouping(rec, 1000, 20*time.Millisecond)
	save("p6", true)
	rec.Event(runtime.Event{Type: runtime.EventNodeFinished, Path: "p6"})
	save("x7", false)
	deadline := time.Now().Add(5 * time.Second)
	for inDB() != 7 || events() != 2 {
		if time.Now().After(deadline) {
			t.Fatal("checkpoints and events were not committed after the group delay")
		}
		time.Sleep(5 * time.Millisecond)
	}
	rec.Event(runtime.Event{Type: runtime.EventNodeFinished, Path: "alone"})
	for deadline := time.Now().Add(5 * time.Second); events() != 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("an event was not committed after the group delay")
		}
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cps, _ := s.Checkpoints(ctx, "r", 0)
	for i, cp := range cps {
		if cp.Seq != int64(i+1) {
			t.Fatalf("checkpoint %s has seq %d, want %d", cp.Path, cp.Seq, i+1)
		}
	}
	if left, _ := os.ReadDir(store.JournalDir(s.Path())); len(left) != 0 {
		t.Fatalf("%d journals left after Flush", len(left))
	}
}

// dbCount counts a table's rows through a connection of its own.
func dbCount(s *store.Store, table string, n *int) error {
	db, err := sql.Open("sqlite", s.Path())
	if err != nil {
		return err
	}
	defer db.Close()
	return db.QueryRow(`SELECT COUNT(*) FROM ` + table).Scan(n)
}

// checkedRecorder checks, as each wait returns, that the checkpoint is in
// the store for any other connection to read.
type checkedRecorder struct {
	*store.Recorder
	s   *store.Store
	run string
	t   *testing.T
}

func (c checkedRecorder) Add(ctx context.Context, cp *runtime.Checkpoint) (func() error, error) {
	wait, err := c.Recorder.Add(ctx, cp)
	if err != nil || cp.Pure {
		return wait, err
	}
	seq := cp.Seq
	return func() error {
		if err := wait(); err != nil {
			return err
		}
		durable, err := store.Durable(ctx, c.s, c.run)
		if err != nil {
			return err
		}
		for i := int64(1); i <= seq; i++ {
			if _, ok := durable[i]; !ok {
				c.t.Errorf("checkpoint %d (%s) returned from its wait before checkpoint %d was durable", seq, cp.Path, i)
			}
		}
		return nil
	}, nil
}

// barrier holds every call until n have started, so that they all finish
// at once.
type barrier struct {
	effects
	n       int
	mu      sync.Mutex
	started int
	all     chan struct{}
}

func (b *barrier) Execute(ctx context.Context, s *runtime.Scope, n *dsl.Node) (runtime.Outcome, error) {
	b.mu.Lock()
	b.started++
	if b.started == b.n {
		close(b.all)
	}
	b.mu.Unlock()
	<-b.all
	return b.effects.Execute(ctx, s, n)
}

// TestGroupCommit runs map items that all finish at once: their
// checkpoints share commits, and none returns before it is stored.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "fan.yaml")
	const k = 40
	if err := os.WriteFile(path, []byte(`
version: 1
name: fan
nodes:
  - id: fan
    map:
      over: 1..40
      max_concurrency: 40
      body:
        - id: work
          tool: {name: read_file, args: {path: "${{ item }}"}}
outputs: {n: len(nodes.fan)}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	p, ds := dsl.Load(path)
	if p == nil {
		t.Fatal(ds)
	}
	s := open(t)
	newRun(t, s, "r")
	rec, err := s.Recorder(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	store.SlowJournal(rec, 2*time.Millisecond)
	b := &barrier{n: k, all: make(chan struct{})}
	res := runtime.Run(ctx, kindsWith(b), p, nil, runtime.Options{RunID: "r", Checkpointer: checkedRecorder{rec, s, "r", t}, Sink: rec})
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if res.Status != runtime.StatusCompleted || res.Outputs["n"] != k {
		t.Fatalf("%s %v %v", res.Status, res.Err, res.Outputs)
	}
	cps, err := s.Checkpoints(ctx, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(cps) != k+1 || cps[k].Path != "fan" {
		t.Fatalf("%d checkpoints, the last %s; want %d, the map's last", len(cps), cps[len(cps)-1].Path, k+1)
	}
	for i, cp := range cps {
		if cp.Seq != int64(i+1) {
			t.Fatalf("checkpoint %s has seq %d, want %d", cp.Path, cp.Seq, i+1)
		}
	}
	// k items finishing together, while the first write takes 2ms: the
	// others share the next write or two.
	if n := store.JournalWrites(rec); n > 4 {
		t.Fatalf("%d journal writes for %d items finishing at once: not grouped", n, k)
	} else {
		t.Logf("%d items in %d journal writes", k, n)
	}
}

func kindsWith(tool runtime.Executor) runtime.Registry {
	k := nodes.Kinds(nodes.Services{})
	k[dsl.KindTool] = tool
	return k
}
