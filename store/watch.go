package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/flowrun/flowrun/runtime"
)

// Mark changes whenever any run is created or updated, any event is
// recorded or any batch item is rated, by this process or another: a
// watcher polls it and reads more only when it moved. It costs two index
// lookups and a read of the ratings, which people make one at a time.
func (s *Store) Mark(ctx context.Context) (string, error) {
	var runs int64
	var updated, events, rated any
	err := s.db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM runs), (SELECT MAX(updated_at) FROM runs), (SELECT MAX(rowid) FROM events),
		(SELECT MAX(rated_at) FROM batch_ratings)`).
		Scan(&runs, &updated, &events, &rated)
	if err != nil {
		return "", fmt.Errorf("run store %s: %w", s.path, err)
	}
	return fmt.Sprint(runs, updated, events, rated), nil
}

// Status is a run's status as Run reports it (interrupted when the
// process running it died) and when it started, for a watcher that asks
// at every change: it reads three columns, never the run's inputs,
// outputs or pipeline files, which may be large.
func (s *Store) Status(ctx context.Context, id string) (status runtime.Status, started time.Time, err error) {
	var pid int
	var pidStart string
	var at sql.NullString
	err = s.db.QueryRowContext(ctx, `SELECT status, pid, pid_start, started_at FROM runs WHERE id = ?`, id).Scan(&status, &pid, &pidStart, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return "", time.Time{}, s.notFound(ctx, id)
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("run %s: reading its status from %s: %w", id, s.path, err)
	}
	if status == runtime.StatusRunning && !alive(pid, pidStart) {
		status = runtime.StatusInterrupted
	}
	return status, parseTime(at), nil
}

// EventsAfter returns a run's events numbered after seq, in order, and
// the number of the last one (seq when there are none).
func (s *Store) EventsAfter(ctx context.Context, runID string, seq int64) ([]runtime.Event, int64, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT seq, data FROM events WHERE run_id = ? AND seq > ? ORDER BY seq`, runID, seq)
	if err != nil {
		return nil, seq, err
	}
	type row struct {
		seq  int64
		data string
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.seq, &r.data); err != nil {
			rows.Close()
			return nil, seq, err
		}
		got = append(got, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, seq, err
	}
	vs := &valueReader{db: s.db}
	out := make([]runtime.Event, 0, len(got))
	for _, r := range got {
		data, err := vs.restore(ctx, r.data)
		if err != nil {
			return nil, seq, fmt.Errorf("run %s: %w", runID, err)
		}
		var e runtime.Event
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return nil, seq, fmt.Errorf("run %s: event %d: %w", runID, r.seq, err)
		}
		out = append(out, e)
		seq = r.seq
	}
	return out, seq, nil
}

// SpentSoFar is what a run's recorded model turns cost and used, for a
// run still in progress (a finished run's record has its totals).
func (s *Store) SpentSoFar(ctx context.Context, runID string) (costUSD float64, tokens int64, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(json_extract(data, '$.turn.cost_usd')), 0), COALESCE(SUM(json_extract(data, '$.turn.usage.total')), 0)
		FROM events WHERE run_id = ? AND type = 'model_turn'`, runID).Scan(&costUSD, &tokens)
	if err != nil {
		return 0, 0, fmt.Errorf("run %s: %w", runID, err)
	}
	return costUSD, tokens, nil
}
