package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/runtime"
)

// TestRatingsAndReasoningMigrate opens a database written before ratings
// and judge reasoning existed, with a finished batch in it: the batch
// reads back whole, its items take a reasoning and a rating, a second
// rating of an item replaces the first, and an unknown item is refused
// by name with a did-you-mean.
func TestRatingsAndReasoningMigrate(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "runs.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	b := &Batch{ID: "b-old", Pipeline: "p.yaml", Dataset: "d.jsonl"}
	if err := s.CreateBatch(ctx, b, []*BatchItem{{Index: 0, Key: "task-1", Item: map[string]any{"q": "one"}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishItem(ctx, &BatchItem{Batch: b.ID, Index: 0, Key: "task-1", Status: runtime.StatusCompleted,
		Scores: map[string]any{"pass": true}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Undo the ratings migration and those after it, as a database of the
	// version before it.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	before := slices.IndexFunc(migrations, func(m string) bool { return strings.Contains(m, "CREATE TABLE batch_ratings") })
	for _, q := range []string{`DROP TABLE batch_ratings`, `ALTER TABLE batch_items DROP COLUMN reasoning`, `ALTER TABLE batch_items DROP COLUMN checks`, `ALTER TABLE runs DROP COLUMN spec`, `DROP INDEX runs_child_of`, `ALTER TABLE runs DROP COLUMN child_of`,
		`ALTER TABLE batches DROP COLUMN label`, `ALTER TABLE batches DROP COLUMN description`,
		fmt.Sprintf(`UPDATE schema_version SET version = %d`, before)} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, err = Open(path)
	if err != nil {
		t.Fatalf("opening the older database: %v", err)
	}
	defer s.Close()
	items, err := s.BatchItems(ctx, b.ID)
	if err != nil || len(items) != 1 || items[0].Scores["pass"] != true || items[0].Reasoning != nil {
		t.Fatalf("items after the migration: %+v, %v", items, err)
	}
	items[0].Reasoning = map[string]string{"reason": "the answer names the wrong city"}
	if err := s.FinishItem(ctx, items[0]); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Rating{{Batch: b.ID, Key: "task-1", Pass: true, Note: "first look"}, {Batch: b.ID, Key: "task-1", Pass: false, Note: "wrong city"}} {
		if err := s.Rate(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	items, _ = s.BatchItems(ctx, b.ID)
	if items[0].Reasoning["reason"] != "the answer names the wrong city" {
		t.Errorf("reasoning read back %v", items[0].Reasoning)
	}
	ratings, err := s.Ratings(ctx, b.ID)
	if err != nil || len(ratings) != 1 || ratings["task-1"].Pass || ratings["task-1"].Note != "wrong city" || ratings["task-1"].Rated.IsZero() {
		t.Fatalf("ratings %+v, %v", ratings["task-1"], err)
	}
	err = s.Rate(ctx, &Rating{Batch: b.ID, Key: "task-2", Pass: true})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `batch b-old has no item "task-2"`) || !strings.Contains(err.Error(), "did you mean task-1") {
		t.Fatalf("rating an unknown item: %v", err)
	}
}
