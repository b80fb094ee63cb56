package store

import (
	"context"
	"fmt"
	"time"
)

// FindRun returns the run ref names: its id, an unambiguous prefix of
// one, or "last" (the newest run). Every command that takes a run goes
// through it. A prefix of several runs gets *AmbiguousError listing them;
// an unknown ref gets ErrNotFound naming the ids that contain it.
func (s *Store) FindRun(ctx context.Context, ref string) (*Run, error) {
	if ref == "last" {
		found, err := queryAll(ctx, s, scanRun, `SELECT `+runColumns+` FROM runs ORDER BY started_at DESC, id DESC LIMIT 1`)
		if err != nil {
			return nil, fmt.Errorf("run store %s: %w", s.path, err)
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%w: no run in %s yet: flowrun PIPELINE.yaml starts one", ErrNotFound, s.path)
		}
		return found[0], nil
	}
	if ref == "" {
		return nil, s.notFound(ctx, ref)
	}
	found, err := queryAll(ctx, s, scanRun, `SELECT `+runColumns+` FROM runs WHERE id = ? OR substr(id, 1, length(?)) = ?
		ORDER BY id = ? DESC, started_at DESC LIMIT 6`, ref, ref, ref, ref)
	if err != nil {
		return nil, fmt.Errorf("run store %s: %w", s.path, err)
	}
	if len(found) == 0 {
		return nil, s.notFound(ctx, ref)
	}
	return pickRef(s, "run", ref, found, func(r *Run) string { return r.ID })
}

// CheckpointInfo is one of a run's checkpoints as a list shows it: the
// node that finished and when. Seq is what resume --from takes.
type CheckpointInfo struct {
	Seq     int64     `json:"seq"`
	Path    string    `json:"path"`
	Created time.Time `json:"created"`
}

// ListCheckpoints lists a run's current checkpoints (not those a rollback
// discarded), oldest first, without their data.
func (s *Store) ListCheckpoints(ctx context.Context, runID string) ([]CheckpointInfo, error) {
	if err := s.settle(ctx, runID); err != nil {
		return nil, err
	}
	return queryAll(ctx, s, func(row interface{ Scan(...any) error }) (CheckpointInfo, error) {
		var c CheckpointInfo
		var created string
		if err := row.Scan(&c.Seq, &c.Path, &created); err != nil {
			return c, err
		}
		c.Created, _ = time.Parse(time.RFC3339Nano, created)
		return c, nil
	}, `SELECT seq, path, created_at FROM checkpoints WHERE run_id = ? AND discarded = 0 ORDER BY seq`, runID)
}
