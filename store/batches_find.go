package store

import (
	"context"
	"fmt"
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
		return nil, fmt.Errorf("%w: no batch in %s yet: flowrun batch PIPELINE --dataset D starts one", ErrNotFound, s.path)
	}
	return all[0], nil
}
