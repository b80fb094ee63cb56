package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// TestLostFileRefusesWrites: once the database file is truncated, deleted
// or replaced under an open store, a recorder's commit and Finish fail
// with *store.LostError naming the file, and keep failing.
func TestLostFileRefusesWrites(t *testing.T) {
	ctx := context.Background()
	for _, damage := range []string{"truncated", "deleted", "replaced"} {
		t.Run(damage, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "runs.db")
			s, err := store.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			newRun(t, s, "r1")
			rec, err := s.Recorder(ctx, "r1")
			if err != nil {
				t.Fatal(err)
			}
			rec.Event(runtime.Event{Type: runtime.EventRunStarted, Run: "r1"})
			if err := rec.Flush(ctx); err != nil {
				t.Fatal(err)
			}
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
