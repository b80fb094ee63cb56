package store

import (
	"context"
	"fmt"

	"github.com/flowrun/flowrun/redact"
	"github.com/flowrun/flowrun/runtime"
)

// RequestStop asks whichever process holds a running run to stop it, with
// reason: that process sees the request within a fraction of a second
// (durable polls StopRequested) and ends the run stopped, resumable. A
// run that is not running (finished, waiting, interrupted) is refused.
// Resuming or finishing the run clears the request.
func (s *Store) RequestStop(ctx context.Context, id, reason string) error {
	r, err := s.Run(ctx, id)
	if err != nil {
		return err
	}
	if r.Status != runtime.StatusRunning {
		return fmt.Errorf("run %s is %s, not running: there is nothing to stop", id, r.Status)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE runs SET stop_requested = ? WHERE id = ? AND status = ?`, redact.String(reason), id, runtime.StatusRunning)
	if err != nil {
		return fmt.Errorf("asking run %s to stop in %s: %w", id, s.path, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("run %s ended before it could be asked to stop", id)
	}
	return nil
}

// StopRequested returns the reason of a stop asked for run id since it was
// last claimed, or "" when none was. It costs one primary-key lookup.
func (s *Store) StopRequested(ctx context.Context, id string) (string, error) {
	var reason string
	if err := s.db.QueryRowContext(ctx, `SELECT stop_requested FROM runs WHERE id = ?`, id).Scan(&reason); err != nil {
		return "", fmt.Errorf("run %s: reading its stop request from %s: %w", id, s.path, err)
	}
	return reason, nil
}
