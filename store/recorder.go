package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/runtime"
)

// Recorder writes one run's events and checkpoints. Events are buffered and
// written in the same transaction as the next checkpoint, so a node costs
// one commit; Flush writes what is left when the run ends.
type Recorder struct {
	s     *Store
	run   string
	mu    sync.Mutex
	buf   []runtime.Event
	event int64 // last event seq written
	cpSeq int64 // last checkpoint seq written, discarded ones included
}

// Recorder returns the recorder for a run, continuing its event sequence.
func (s *Store) Recorder(ctx context.Context, runID string) (*Recorder, error) {
	r := &Recorder{s: s, run: runID}
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?`, runID).Scan(&r.event); err != nil {
		return nil, err
	}
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM checkpoints WHERE run_id = ?`, runID).Scan(&r.cpSeq); err != nil {
		return nil, err
	}
	return r, nil
}

// Event buffers an event.
func (r *Recorder) Event(e runtime.Event) {
	r.mu.Lock()
	r.buf = append(r.buf, e)
	r.mu.Unlock()
}

// Save writes a checkpoint and the events before it in one transaction.
// It numbers checkpoints itself, after any a rollback discarded, so that a
// run's history is never overwritten.
func (r *Recorder) Save(ctx context.Context, cp *runtime.Checkpoint) error {
	r.mu.Lock()
	cp.Seq = r.cpSeq + 1
	r.mu.Unlock()
	data, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", cp.Path, err)
	}
	err = r.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO checkpoints (run_id, seq, path, data, created_at) VALUES (?, ?, ?, ?, ?)`,
			r.run, cp.Seq, cp.Path, string(data), now())
		return err
	})
	if err == nil {
		r.mu.Lock()
		r.cpSeq = cp.Seq
		r.mu.Unlock()
	}
	return err
}

// Flush writes buffered events.
func (r *Recorder) Flush(ctx context.Context) error {
	return r.write(ctx, nil)
}

func (r *Recorder) write(ctx context.Context, also func(*sql.Tx) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	tx, err := r.s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	seq, err := r.insertEvents(ctx, tx)
	if err != nil {
		return err
	}
	if also != nil {
		if err := also(tx); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	r.event, r.buf = seq, r.buf[:0]
	return nil
}

// insertEvents writes the buffered events and returns the last seq used.
func (r *Recorder) insertEvents(ctx context.Context, tx *sql.Tx) (int64, error) {
	seq := r.event
	if len(r.buf) == 0 {
		return seq, nil
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO events (run_id, seq, type, path, data) VALUES (?, ?, ?, ?, ?)`)
	if err != nil {
		return 0, err
	}
	defer stmt.Close()
	for _, e := range r.buf {
		data, err := json.Marshal(e)
		if err != nil {
			return 0, fmt.Errorf("event %s %s: %w", e.Type, e.Path, err)
		}
		seq++
		if _, err := stmt.ExecContext(ctx, r.run, seq, e.Type, e.Path, string(data)); err != nil {
			return 0, err
		}
	}
	return seq, nil
}

// Checkpoints returns a run's current checkpoints in order: those not
// discarded by a rollback, up to seq upTo (all when upTo is 0).
func (s *Store) Checkpoints(ctx context.Context, runID string, upTo int64) ([]*runtime.Checkpoint, error) {
	q := `SELECT data FROM checkpoints WHERE run_id = ? AND discarded = 0 ORDER BY seq`
	args := []any{runID}
	if upTo > 0 {
		q = `SELECT data FROM checkpoints WHERE run_id = ? AND discarded = 0 AND seq <= ? ORDER BY seq`
		args = append(args, upTo)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*runtime.Checkpoint
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		cp, err := decodeCheckpoint(data)
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", runID, err)
		}
		out = append(out, cp)
	}
	return out, rows.Err()
}

// decodeCheckpoint reads a checkpoint back with integral numbers as int,
// as the run produced them.
func decodeCheckpoint(data string) (*runtime.Checkpoint, error) {
	var cp runtime.Checkpoint
	if err := json.Unmarshal([]byte(data), &cp); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	v, err := dsl.FromJSON([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	raw := v.(map[string]any)
	cp.Output = raw["output"]
	cp.State, _ = raw["state"].(map[string]any)
	cp.Nodes, _ = raw["nodes"].(map[string]any)
	return &cp, nil
}

// Events returns a run's events in order.
func (s *Store) Events(ctx context.Context, runID string) ([]runtime.Event, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT data FROM events WHERE run_id = ? ORDER BY seq`, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []runtime.Event
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		var e runtime.Event
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
