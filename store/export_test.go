package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// SetGrouping changes how many pure checkpoints a recorder keeps back, and
// for how long, so that tests can choose when commits happen.
func SetGrouping(r *Recorder, max int, delay time.Duration) {
	r.mu.Lock()
	r.groupMax, r.groupDelay = max, delay
	r.mu.Unlock()
}

// JournalWrites is how many writes to its journal a recorder has made.
func JournalWrites(r *Recorder) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes
}

// Durable returns the paths of a run's checkpoints, by seq, that are in
// the database or in a journal, live journals included: what a kill at
// this moment would leave.
func Durable(ctx context.Context, s *Store, runID string) (map[int64]string, error) {
	out := map[int64]string{}
	// The journal first, then the database: the mover commits a journal's
	// checkpoints to the database before it deletes the journal, so a
	// checkpoint moved in between is still seen, in the database.
	entries, _ := os.ReadDir(journalDir(s.path))
	for _, e := range entries {
		if id, _, _, ok := journalName(e.Name()); !ok || id != runID {
			continue
		}
		cps, err := readJournal(filepath.Join(journalDir(s.path), e.Name()))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		for _, cp := range cps {
			out[cp.seq] = cp.path
		}
	}
	rows, err := s.db.QueryContext(ctx, `SELECT seq, path FROM checkpoints WHERE run_id = ?`, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var path string
		if err := rows.Scan(&seq, &path); err != nil {
			return nil, err
		}
		out[seq] = path
	}
	return out, rows.Err()
}

// JournalDir is where the journals of the store at dbPath go.
func JournalDir(dbPath string) string { return journalDir(dbPath) }

// SlowJournal makes a recorder's journal writes take at least d, so that
// checkpoints arriving meanwhile gather for the next write.
func SlowJournal(r *Recorder, d time.Duration) {
	r.mu.Lock()
	r.testHook = func() { time.Sleep(d) }
	r.mu.Unlock()
}
