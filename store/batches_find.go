package store

import (
	"context"
	"database/sql"
	"errors"
)

// FindBatch is Batch that also accepts "last": the newest batch.
func (s *Store) FindBatch(ctx context.Context, ref string) (*Batch, error) {
	if ref != "last" {
		return s.Batch(ctx, ref)
	}
	all, err := s.Batches(ctx)
	if err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, &NotFoundError{What: "batch", Ref: ref, Path: s.path, None: true}
	}
	return all[0], nil
}

// BatchItemOfRun is the batch item that run runID computed (with the
// dataset row it ran on), or nil when no batch ran it.
func (s *Store) BatchItemOfRun(ctx context.Context, runID string) (*BatchItem, error) {
	var batchID string
	var index, repeat int
	err := s.db.QueryRowContext(ctx, `SELECT batch_id, idx, repeat FROM batch_items WHERE run_id = ?`, runID).Scan(&batchID, &index, &repeat)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	items, err := s.BatchItems(ctx, batchID)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		if it.Index == index && it.Repeat == repeat {
			return it, nil
		}
	}
	return nil, nil
}
