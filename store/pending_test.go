package store

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/flowrun/flowrun/runtime"
)

// TestPendingQuestion checks that a waiting run's question reads back as
// the question it was, both as Finish records it and as a row written
// before Pending was typed holds it (a JSON object with the same names,
// in another order).
func TestPendingQuestion(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := &runtime.Question{Path: "refine[2]/ask", Node: "ask", Kind: runtime.QuestionAsk, Text: "Which one?",
		Schema: map[string]any{"type": "string", "enum": []any{"a", "b"}}, Default: "a", HasDefault: true}
	for _, id := range []string{"new", "old"} {
		if err := s.CreateRun(ctx, &Run{ID: id, Pipeline: "p.yaml", PipelineName: "p"}); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(ctx, id, Ending{Status: runtime.StatusWaiting, Pending: want}); err != nil {
			t.Fatal(err)
		}
	}
	old := `{"default":"a","has_default":true,"kind":"ask","node":"ask","path":"refine[2]/ask","schema":{"enum":["a","b"],"type":"string"},"text":"Which one?"}`
	if _, err := s.db.ExecContext(ctx, `UPDATE runs SET pending = ? WHERE id = 'old'`, old); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"new", "old"} {
		r, err := s.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r.Pending, want) {
			t.Errorf("run %s: pending %+v, want %+v", id, r.Pending, want)
		}
	}
	if err := s.Finish(ctx, "new", Ending{Status: runtime.StatusCompleted}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Run(ctx, "new"); err != nil || r.Pending != nil {
		t.Errorf("a completed run: pending %+v, %v", r.Pending, err)
	}
}
