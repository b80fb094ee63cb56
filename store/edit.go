package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/flowrun/flowrun/redact"
)

// EditState sets state variables in checkpoint seq of run runID, so that
// the run, resumed from there, goes on as if the node of that checkpoint
// had written them: how a fork or a run waiting on a question starts
// from edited state. The run must not be running.
func (s *Store) EditState(ctx context.Context, runID string, seq int64, values map[string]any) error {
	if err := s.settle(ctx, runID); err != nil {
		return err
	}
	var data string
	err := s.db.QueryRowContext(ctx, `SELECT data FROM checkpoints WHERE run_id = ? AND seq = ? AND discarded = 0`, runID, seq).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("editing the state of run %s: it has no checkpoint %d", runID, seq)
	}
	if err != nil {
		return fmt.Errorf("editing the state of run %s: %w", runID, err)
	}
	vs := &valueReader{db: s.db}
	if data, err = vs.restore(ctx, data); err != nil {
		return fmt.Errorf("editing the state of run %s: %w", runID, err)
	}
	cp, err := decodeCheckpoint(data)
	if err != nil {
		return fmt.Errorf("editing the state of run %s: %w", runID, err)
	}
	if cp.State == nil {
		cp.State = map[string]any{}
	}
	maps.Copy(cp.State, values)
	b, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("editing the state of run %s: %w", runID, err)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE checkpoints SET data = ? WHERE run_id = ? AND seq = ?`, string(redact.JSON(b)), runID, seq); err != nil {
		return fmt.Errorf("editing the state of run %s: %w", runID, err)
	}
	return nil
}
