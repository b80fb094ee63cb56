package store_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

func TestHITL04FindRun(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	if _, err := s.FindRun(ctx, "last"); !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "no run in") {
		t.Fatalf("last in an empty store: %v", err)
	}
	for _, id := range []string{"20260101T000000-aaaa1111", "20260101T000000-aaaa2222", "20260102T000000-bbbb"} {
		newRun(t, s, id)
		time.Sleep(2 * time.Millisecond) // distinct start times: "last" is the newest
	}
	for ref, want := range map[string]string{
		"last":                     "20260102T000000-bbbb",
		"20260101T000000-aaaa1":    "20260101T000000-aaaa1111",
		"20260101T000000-aaaa2222": "20260101T000000-aaaa2222",
		"2026010":                  "",
	} {
		r, err := s.FindRun(ctx, ref)
		if want == "" {
			var amb *store.AmbiguousError
			if !errors.As(err, &amb) || len(amb.Matches) != 3 || !strings.Contains(err.Error(), `run "2026010" is ambiguous`) {
				t.Errorf("%s: %v, want ambiguous between all three", ref, err)
			}
			continue
		}
		if err != nil || r.ID != want {
			t.Errorf("%s: %v %v, want %s", ref, r, err, want)
		}
	}
	for ref, hint := range map[string]string{
		"20260102T000000-bbbx": "did you mean 20260102T000000-bbbb?",
		"aaaa2":                "did you mean 20260101T000000-aaaa2222?",
		"zzz":                  `no such run "zzz" in `,
		"":                     `no such run "" in `,
		"2026010_":             "no such run", // _ is no wildcard
	} {
		_, err := s.FindRun(ctx, ref)
		var nf *store.NotFoundError
		if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), hint) || !errors.As(err, &nf) || nf.What != "run" || nf.Ref != ref {
			t.Errorf("%q: %v, want not found with %q", ref, err, hint)
		}
	}
}

// orphan makes a run look held by a process that is gone: this pid, but
// another process start time (a recycled pid).
func orphan(t *testing.T, s *store.Store, id string) {
	t.Helper()
	db, err := sql.Open("sqlite", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE runs SET pid_start = 'gone', started_at = '2020-01-01T00:00:00Z' WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
}

func TestHITL05DeadHolderReadsInterrupted(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	newRun(t, s, "dead")
	newRun(t, s, "live")
	orphan(t, s, "dead")
	r, err := s.Run(ctx, "dead")
	if err != nil || r.Status != runtime.StatusInterrupted || !strings.Contains(r.Reason, "ended without recording how the run ended") {
		t.Fatalf("a run whose holder is gone: %+v %v", r, err)
	}
	all, _ := s.Runs(ctx)
	for _, r := range all {
		if want := map[string]runtime.Status{"dead": runtime.StatusInterrupted, "live": runtime.StatusRunning}[r.ID]; r.Status != want {
			t.Errorf("Runs: %s is %s, want %s", r.ID, r.Status, want)
		}
	}
	if r, err := s.Claim(ctx, "dead"); err != nil || r.Status != runtime.StatusRunning {
		t.Fatalf("claiming an interrupted run: %v %v", r, err)
	}
	if r, _ := s.Run(ctx, "dead"); r.Status != runtime.StatusRunning {
		t.Fatalf("after its claim: %s", r.Status)
	}

	// Prune takes interrupted runs, never one a live process holds.
	orphan(t, s, "dead")
	db, _ := sql.Open("sqlite", s.Path())
	defer db.Close()
	if _, err := db.Exec(`UPDATE runs SET started_at = '2020-01-01T00:00:00Z'`); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Prune(ctx, time.Now()); err != nil || n != 1 {
		t.Fatalf("prune: %d %v, want the interrupted run only", n, err)
	}
	if _, err := s.Run(ctx, "live"); err != nil {
		t.Fatalf("prune took the live run: %v", err)
	}
}
