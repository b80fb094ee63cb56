package store

import (
	"context"
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
