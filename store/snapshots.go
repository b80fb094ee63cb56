package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/flowrun/flowrun/runtime"
)

// Snapshot is an immutable, labelled pointer to one of a run's checkpoints.
type Snapshot struct {
	Run     string    `json:"run"`
	Label   string    `json:"label"`
	Seq     int64     `json:"seq"` // the checkpoint it holds; 0 is before the first node
	Kind    string    `json:"kind"`
	Created time.Time `json:"created"`
}

// Snapshot kinds.
const (
	KindSnapshot = "snapshot"
	KindRollback = "rollback"
)

// Snapshot labels the run's current checkpoint. Labels are unique per run:
// a snapshot is never overwritten.
func (s *Store) Snapshot(ctx context.Context, runID, label string) (*Snapshot, error) {
	if _, err := s.Run(ctx, runID); err != nil {
		return nil, err
	}
	if err := s.settle(ctx, runID); err != nil {
		return nil, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	snap, err := addSnapshot(ctx, tx, runID, label, KindSnapshot, -1)
	if err != nil {
		return nil, err
	}
	return snap, tx.Commit()
}

// addSnapshot inserts a snapshot at seq, or at the run's current
// checkpoint when seq < 0.
func addSnapshot(ctx context.Context, tx *sql.Tx, runID, label, kind string, seq int64) (*Snapshot, error) {
	if seq < 0 {
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM checkpoints WHERE run_id = ? AND discarded = 0`, runID).Scan(&seq); err != nil {
			return nil, err
		}
	}
	var exists int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM snapshots WHERE run_id = ? AND label = ?`, runID, label).Scan(&exists); err != nil {
		return nil, err
	}
	if exists > 0 {
		return nil, fmt.Errorf("run %s already has a snapshot labelled %q: snapshots are immutable; pick another label", runID, label)
	}
	t := now()
	if _, err := tx.ExecContext(ctx, `INSERT INTO snapshots (run_id, label, seq, kind, created_at) VALUES (?, ?, ?, ?, ?)`,
		runID, label, seq, kind, t); err != nil {
		return nil, err
	}
	return &Snapshot{Run: runID, Label: label, Seq: seq, Kind: kind, Created: parseTime(sql.NullString{String: t, Valid: true})}, nil
}

// Snapshots lists a run's snapshots, oldest first.
func (s *Store) Snapshots(ctx context.Context, runID string) ([]*Snapshot, error) {
	if _, err := s.Run(ctx, runID); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT label, seq, kind, created_at FROM snapshots WHERE run_id = ? ORDER BY created_at, rowid`, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*Snapshot
	for rows.Next() {
		sn := &Snapshot{Run: runID}
		var created sql.NullString
		if err := rows.Scan(&sn.Label, &sn.Seq, &sn.Kind, &created); err != nil {
			return nil, err
		}
		sn.Created = parseTime(created)
		out = append(out, sn)
	}
	return out, rows.Err()
}

// ErrNoSnapshot is returned for an unknown snapshot label or checkpoint.
var ErrNoSnapshot = errors.New("no such snapshot")

// Point resolves a snapshot label, or a checkpoint sequence number, to a
// checkpoint seq of the run.
func (s *Store) Point(ctx context.Context, runID, ref string) (int64, error) {
	if err := s.settle(ctx, runID); err != nil {
		return 0, err
	}
	var seq int64
	err := s.db.QueryRowContext(ctx, `SELECT seq FROM snapshots WHERE run_id = ? AND label = ?`, runID, ref).Scan(&seq)
	if err == nil {
		return seq, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, err
	}
	if n, perr := strconv.ParseInt(ref, 10, 64); perr == nil && n >= 0 {
		var count int
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM checkpoints WHERE run_id = ? AND seq = ? AND discarded = 0`, runID, n).Scan(&count); err != nil {
			return 0, err
		}
		if count > 0 || n == 0 {
			return n, nil
		}
		return 0, &NotFoundError{What: "checkpoint", Ref: ref, Path: s.path, Run: runID}
	}
	return 0, &NotFoundError{What: "snapshot", Ref: ref, Path: s.path, Run: runID}
}

// RolledBack begins the reason of a run left stopped by a rollback; the
// snapshot or checkpoint it went back to follows.
const RolledBack = "rolled back to "

// Rollback makes the checkpoint a snapshot holds the run's current state:
// later checkpoints are discarded (kept, but no longer replayed) and a
// rollback snapshot records what happened. It runs nothing; the run is
// left stopped, ready to resume from there.
func (s *Store) Rollback(ctx context.Context, runID, ref string) (*Snapshot, error) {
	seq, err := s.Point(ctx, runID, ref)
	if err != nil {
		return nil, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var status runtime.Status
	var pid int
	var pidStart string
	if err := tx.QueryRowContext(ctx, `SELECT status, pid, pid_start FROM runs WHERE id = ?`, runID).Scan(&status, &pid, &pidStart); err != nil {
		return nil, err
	}
	if status == runtime.StatusRunning && pid != os.Getpid() && alive(pid, pidStart) {
		return nil, &InProgressError{Run: runID, PID: pid}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE checkpoints SET discarded = 1 WHERE run_id = ? AND seq > ?`, runID, seq); err != nil {
		return nil, err
	}
	label := fmt.Sprintf("rollback-to-%s-%s", ref, time.Now().UTC().Format("20060102T150405.000"))
	snap, err := addSnapshot(ctx, tx, runID, label, KindRollback, seq)
	if err != nil {
		return nil, err
	}
	reason := RolledBack + ref
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = 'stopped', reason = ?, error = '', outputs = NULL, pending = NULL, updated_at = ? WHERE id = ?`,
		reason, now(), runID); err != nil {
		return nil, err
	}
	return snap, tx.Commit()
}

// Fork creates child, a new run that starts from the parent's checkpoint
// seq: it gets copies of the parent's checkpoints up to there. The parent
// is not changed.
func (s *Store) Fork(ctx context.Context, parentID string, seq int64, child *Run) error {
	parent, err := s.Run(ctx, parentID)
	if err != nil {
		return err
	}
	if err := s.settle(ctx, parentID); err != nil {
		return err
	}
	child.ParentRun, child.ParentSeq = parentID, seq
	if child.Inputs == nil {
		child.Inputs = parent.Inputs
	}
	if err := s.CreateRun(ctx, child); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO checkpoints (run_id, seq, path, data, created_at)
		SELECT ?, seq, path, data, created_at FROM checkpoints WHERE run_id = ? AND discarded = 0 AND seq <= ?`,
		child.ID, parentID, seq); err != nil {
		return err
	}
	// The copies may name values the parent shares (see shared.go).
	if _, err := tx.ExecContext(ctx, `INSERT INTO value_refs (run_id, hash) SELECT ?, hash FROM value_refs WHERE run_id = ?`,
		child.ID, parentID); err != nil {
		return err
	}
	return tx.Commit()
}
