package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// TestNotFoundDescribes: each lookup of a record the store does not hold
// is a *NotFoundError saying what was looked for, matching ErrNotFound or
// ErrNoSnapshot, and tells no command to type (that is the front end's).
func TestNotFoundDescribes(t *testing.T) {
	ctx := context.Background()
	empty, s := open(t), open(t)
	checkpointed(t, s, "20261122T000000-abcd1234")
	if err := s.CreateBatch(ctx, &store.Batch{ID: "b20261122-ffff"}, nil); err != nil {
		t.Fatal(err)
	}
	lookups := []struct {
		name string
		find func() error
		is   error
		want store.NotFoundError
		text string
	}{
		{"no run yet", func() error { _, err := empty.FindRun(ctx, "last"); return err }, store.ErrNotFound,
			store.NotFoundError{What: "run", Ref: "last", None: true}, "no such run: no run in "},
		{"an unknown run", func() error { _, err := s.FindRun(ctx, "zzz"); return err }, store.ErrNotFound,
			store.NotFoundError{What: "run", Ref: "zzz"}, `no such run "zzz" in `},
		{"a run like another", func() error { _, err := s.Run(ctx, "abcd12"); return err }, store.ErrNotFound,
			store.NotFoundError{What: "run", Ref: "abcd12", Similar: []string{"20261122T000000-abcd1234"}}, "(did you mean 20261122T000000-abcd1234?)"},
		{"no batch yet", func() error { _, err := empty.FindBatch(ctx, "last"); return err }, store.ErrNotFound,
			store.NotFoundError{What: "batch", Ref: "last", None: true}, "no such run: no batch in "},
		{"an unknown batch", func() error { _, err := s.FindBatch(ctx, "zzz"); return err }, store.ErrNotFound,
			store.NotFoundError{What: "batch", Ref: "zzz"}, `no such run: no batch "zzz" in `},
		{"an unknown checkpoint", func() error { _, err := s.Point(ctx, "20261122T000000-abcd1234", "7"); return err }, store.ErrNoSnapshot,
			store.NotFoundError{What: "checkpoint", Ref: "7", Run: "20261122T000000-abcd1234"}, "no such snapshot: run 20261122T000000-abcd1234 has no checkpoint 7"},
		{"an unknown snapshot", func() error { _, err := s.Point(ctx, "20261122T000000-abcd1234", "nope"); return err }, store.ErrNoSnapshot,
			store.NotFoundError{What: "snapshot", Ref: "nope", Run: "20261122T000000-abcd1234"}, `no such snapshot "nope" for run 20261122T000000-abcd1234`},
	}
	for _, c := range lookups {
		err := c.find()
		var nf *store.NotFoundError
		if !errors.As(err, &nf) || !errors.Is(err, c.is) {
			t.Errorf("%s: %v, want a *NotFoundError that is %v", c.name, err, c.is)
			continue
		}
		nf.Path = ""
		if nf.What != c.want.What || nf.Ref != c.want.Ref || nf.Run != c.want.Run || nf.None != c.want.None || strings.Join(nf.Similar, ",") != strings.Join(c.want.Similar, ",") {
			t.Errorf("%s: %+v, want %+v", c.name, *nf, c.want)
		}
		if msg := err.Error(); !strings.Contains(msg, c.text) || strings.Contains(msg, "flowrun ") {
			t.Errorf("%s: %q, want a description with %q and no command", c.name, msg, c.text)
		}
	}
}

// TestReasonsDescribe: the reason of a run or batch its process left
// interrupted, and of a rolled-back run, says what happened and no
// command to type.
func TestReasonsDescribe(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	newRun(t, s, "dead")
	orphan(t, s, "dead")
	r, err := s.Run(ctx, "dead")
	if err != nil || r.Status != runtime.StatusInterrupted || strings.Contains(r.Reason, "flowrun") {
		t.Fatalf("interrupted run: %+v %v", r, err)
	}
	checkpointed(t, s, "back")
	if err := s.Finish(ctx, "back", store.Ending{Status: runtime.StatusCompleted}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rollback(ctx, "back", "1"); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Run(ctx, "back"); err != nil || r.Reason != store.RolledBack+"1" {
		t.Fatalf("rolled back run: %+v %v", r, err)
	}
}

// checkpointed records run id with one checkpoint.
func checkpointed(t *testing.T, s *store.Store, id string) {
	t.Helper()
	ctx := context.Background()
	newRun(t, s, id)
	rec, err := s.Recorder(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Save(ctx, &runtime.Checkpoint{Path: "n"}); err != nil {
		t.Fatal(err)
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}
