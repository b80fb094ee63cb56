package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/flowrun/flowrun/runtime"
)

// FindRun returns the run ref names: its id, an unambiguous prefix of
// one, or "last" (the newest run that is no child run). Every command that takes a run goes
// through it. A prefix of several runs gets *AmbiguousError listing them;
// an unknown ref gets ErrNotFound naming the ids that contain it.
func (s *Store) FindRun(ctx context.Context, ref string) (*Run, error) {
	if ref == "last" {
		found, err := queryAll(ctx, s, scanRun, `SELECT `+runColumns+` FROM runs WHERE child_of IS NULL ORDER BY started_at DESC, id DESC LIMIT 1`)
		if err != nil {
			return nil, fmt.Errorf("run store %s: %w", s.path, err)
		}
		if len(found) == 0 {
			return nil, &NotFoundError{What: "run", Ref: ref, Path: s.path, None: true}
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
	// InFlight is set on a node's record of an effect under way (see
	// runtime.Checkpoint.InFlight).
	InFlight *runtime.InFlight `json:"in_flight,omitempty"`
}

// inFlightOf reads the in-flight record of a checkpoint's data, if its
// path says it is one. Such records are small, so never stored shared.
func inFlightOf(path, data string) *runtime.InFlight {
	if !strings.HasSuffix(path, runtime.InFlightSuffix) {
		return nil
	}
	var cp runtime.Checkpoint
	if json.Unmarshal([]byte(data), &cp) != nil {
		return nil
	}
	return cp.InFlight
}

// ListCheckpoints lists a run's current checkpoints (not those a rollback
// discarded), oldest first, without their data. It includes those still
// in a journal (a run in progress, or one killed, read by a command that
// does not write), so that what it lists is what a resume restores.
func (s *Store) ListCheckpoints(ctx context.Context, runID string) ([]CheckpointInfo, error) {
	infos, _, err := s.listCheckpoints(ctx, runID, false)
	return infos, err
}

// ListCheckpointsWithData lists a run's current checkpoints as
// ListCheckpoints does and reads each whole, in one read: a view that
// lists them and shows what each changed (flowrun show) sees the same
// checkpoints in both, journaled ones included.
func (s *Store) ListCheckpointsWithData(ctx context.Context, runID string) ([]CheckpointInfo, []*runtime.Checkpoint, error) {
	return s.listCheckpoints(ctx, runID, true)
}

// listCheckpoints is ListCheckpoints, with each checkpoint's data decoded
// when withData says so (else the second result is nil).
func (s *Store) listCheckpoints(ctx context.Context, runID string, withData bool) ([]CheckpointInfo, []*runtime.Checkpoint, error) {
	if err := s.settle(ctx, runID); err != nil {
		return nil, nil, err
	}
	type row struct {
		CheckpointInfo
		discarded bool
		data      string
	}
	// Without data, only in-flight records' (small) data is read.
	dataColumn := `CASE WHEN path LIKE '%` + runtime.InFlightSuffix + `' THEN data ELSE '' END`
	if withData {
		dataColumn = "data"
	}
	rows, err := queryAll(ctx, s, func(sc interface{ Scan(...any) error }) (row, error) {
		var r row
		var created string
		if err := sc.Scan(&r.Seq, &r.Path, &created, &r.discarded, &r.data); err != nil {
			return r, err
		}
		r.Created, _ = time.Parse(time.RFC3339Nano, created)
		r.InFlight = inFlightOf(r.Path, r.data)
		return r, nil
	}, `SELECT seq, path, created_at, discarded, `+dataColumn+` FROM checkpoints WHERE run_id = ? ORDER BY seq`, runID)
	if err != nil {
		return nil, nil, fmt.Errorf("run store %s: %w", s.path, err)
	}
	stored := make(map[int64]bool, len(rows))
	var listed []row
	for _, r := range rows {
		stored[r.Seq] = true
		if !r.discarded {
			listed = append(listed, r)
		}
	}
	entries, _ := os.ReadDir(journalDir(s.path))
	for _, e := range entries {
		if id, _, _, ok := journalName(e.Name()); !ok || id != runID {
			continue
		}
		cps, _ := readJournal(filepath.Join(journalDir(s.path), e.Name()))
		for _, cp := range cps {
			if !stored[cp.seq] {
				stored[cp.seq] = true
				created, _ := time.Parse(time.RFC3339Nano, cp.created)
				listed = append(listed, row{CheckpointInfo: CheckpointInfo{Seq: cp.seq, Path: cp.path, Created: created,
					InFlight: inFlightOf(cp.path, cp.data)}, data: cp.data})
			}
		}
	}
	slices.SortFunc(listed, func(a, b row) int { return cmp.Compare(a.Seq, b.Seq) })
	var infos []CheckpointInfo
	var points []*runtime.Checkpoint
	vs := &valueReader{db: s.db}
	for _, r := range listed {
		infos = append(infos, r.CheckpointInfo)
		if !withData {
			continue
		}
		data, err := vs.restore(ctx, r.data)
		if err != nil {
			return nil, nil, fmt.Errorf("run %s: %w", runID, err)
		}
		cp, err := decodeCheckpoint(data)
		if err != nil {
			return nil, nil, fmt.Errorf("run %s: %w", runID, err)
		}
		points = append(points, cp)
	}
	return infos, points, nil
}
