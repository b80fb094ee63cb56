package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/flowrun/flowrun/redact"
	"github.com/flowrun/flowrun/runtime"
)

// Batch statuses beyond the run statuses an item may have.
const (
	ItemPending runtime.Status = "pending"
)

// Batch is one pipeline run over a dataset: its record, not its items.
type Batch struct {
	ID           string
	Pipeline     string // path as given
	PipelineAbs  string
	PipelineName string
	PipelineHash string
	Dataset      string // path as given
	DatasetHash  string
	// Label and Description are what a person called the batch: a few
	// words ("shorter prompt") and why it ran.
	Label       string
	Description string
	// Settings are the options it ran with, as JSON: the store keeps
	// them for package batch, which owns their type (batch.Settings).
	Settings json.RawMessage
	Status   runtime.Status // running, completed, stopped, failed, or interrupted
	Reason   string         // why it stopped, when it did
	PID      int            // the process running it, 0 when none
	Started  time.Time
	Updated  time.Time
	Finished time.Time
}

// BatchItem is one dataset item of a batch and what its run gave.
type BatchItem struct {
	Batch  string
	Index  int    // position in the dataset
	Key    string // stable name: a file name, a line number or an id field
	Repeat int    // which of the item's runs (flowrun batch --repeat), from 0
	Item   map[string]any
	Run    string         // the item's run, once started
	Status runtime.Status // ItemPending, or the run's status
	Scores map[string]any
	// Reasoning is why a judge scored the item as it did: its text
	// outputs by name.
	Reasoning map[string]string
	// Checks are, per metric whose value is a list of checks, each check's
	// result: what says which of an item's asserts failed and why.
	Checks     map[string]Checks
	Error      string
	Class      string
	CostUSD    float64
	Tokens     int
	DurationMS float64
	Updated    time.Time
}

// Checks are a metric's checks, their weighted mean score, and the
// threshold that mean was held to (0 when every check must pass).
type Checks struct {
	List      []Check `json:"checks"`
	Score     float64 `json:"score"`
	Threshold float64 `json:"threshold,omitempty"`
}

// Check is one check of a metric: whether it passed (nil when it could
// not be checked, so it counts neither way), its score from 0 to 1, its
// weight in the metric's mean score, and why.
type Check struct {
	Name   string  `json:"name,omitempty"`
	Pass   *bool   `json:"pass"`
	Score  float64 `json:"score"`
	Weight float64 `json:"weight"`
	Reason string  `json:"reason,omitempty"`
}

// CreateBatch records a new batch and its items, all pending, held by this
// process.
func (s *Store) CreateBatch(ctx context.Context, b *Batch, items []*BatchItem) error {
	settings := []byte(b.Settings)
	if len(settings) == 0 {
		settings = []byte("{}")
	} else if !json.Valid(settings) {
		return fmt.Errorf("batch %s: its settings are not JSON", b.ID)
	}
	if err := s.intact(); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("run store %s: %w", s.path, err)
	}
	defer tx.Rollback()
	t := now()
	if _, err := tx.ExecContext(ctx, `INSERT INTO batches (id, pipeline, pipeline_abs, pipeline_name, pipeline_hash, dataset, dataset_hash,
		label, description, flags, status, pid, pid_start, started_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		b.ID, b.Pipeline, b.PipelineAbs, b.PipelineName, b.PipelineHash, b.Dataset, b.DatasetHash,
		redact.String(b.Label), redact.String(b.Description), string(redact.JSON(settings)),
		runtime.StatusRunning, os.Getpid(), processStart(os.Getpid()), t, t); err != nil {
		return fmt.Errorf("batch %s: %w", b.ID, err)
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO batch_items (batch_id, idx, repeat, item_key, item, status, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, it := range items {
		item, err := json.Marshal(it.Item)
		if err != nil {
			return fmt.Errorf("batch %s: item %s: %w", b.ID, it.Key, err)
		}
		if _, err := stmt.ExecContext(ctx, b.ID, it.Index, it.Repeat, it.Key, string(redact.JSON(item)), ItemPending, t); err != nil {
			return fmt.Errorf("batch %s: item %s: %w", b.ID, it.Key, err)
		}
		it.Batch, it.Status = b.ID, ItemPending
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("run store %s: %w", s.path, err)
	}
	b.Status, b.PID = runtime.StatusRunning, os.Getpid()
	return s.intact()
}

const batchColumns = `id, pipeline, pipeline_abs, pipeline_name, pipeline_hash, dataset, dataset_hash, label, description, flags, status, reason, pid,
	pid_start, started_at, updated_at, finished_at`

func scanBatch(row interface{ Scan(...any) error }) (*Batch, error) {
	var b Batch
	var settings, pidStart string
	var started, updated, finished sql.NullString
	if err := row.Scan(&b.ID, &b.Pipeline, &b.PipelineAbs, &b.PipelineName, &b.PipelineHash, &b.Dataset, &b.DatasetHash,
		&b.Label, &b.Description, &settings, &b.Status, &b.Reason, &b.PID, &pidStart, &started, &updated, &finished); err != nil {
		return nil, err
	}
	if b.Status == runtime.StatusRunning && !alive(b.PID, pidStart) {
		b.Status = runtime.StatusInterrupted
		b.Reason = fmt.Sprintf("the process that ran it (pid %d) ended without recording how the batch ended", b.PID)
	}
	b.Settings = json.RawMessage(settings)
	b.Started, b.Updated, b.Finished = parseTime(started), parseTime(updated), parseTime(finished)
	return &b, nil
}

// Batch returns one batch by id or unambiguous id prefix.
func (s *Store) Batch(ctx context.Context, id string) (*Batch, error) {
	found, err := queryAll(ctx, s, scanBatch, `SELECT `+batchColumns+` FROM batches WHERE id = ? OR id LIKE ? ORDER BY id = ? DESC, started_at DESC LIMIT 6`,
		id, strings.ReplaceAll(id, "%", "")+"%", id)
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, &NotFoundError{What: "batch", Ref: id, Path: s.path, Similar: s.similar(ctx, "batches", id)}
	}
	return pickRef(s, "batch", id, found, func(b *Batch) string { return b.ID })
}

// pickRef picks the record ref names among those an id-or-prefix query
// found, an exact match first: that one, the only one, or else an
// *AmbiguousError listing them. found is not empty.
func pickRef[T any](s *Store, what, ref string, found []T, id func(T) string) (T, error) {
	if id(found[0]) == ref || len(found) == 1 {
		return found[0], nil
	}
	ids := make([]string, len(found))
	for i, x := range found {
		ids[i] = id(x)
	}
	var none T
	return none, &AmbiguousError{What: what, Ref: ref, Path: s.path, Matches: ids}
}

// AmbiguousError says an id prefix names more than one record.
type AmbiguousError struct {
	What, Ref, Path string
	Matches         []string
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("%s %q is ambiguous in %s: it starts %s", e.What, e.Ref, e.Path, strings.Join(e.Matches, ", "))
}

// Batches lists batches, newest first.
func (s *Store) Batches(ctx context.Context) ([]*Batch, error) {
	return queryAll(ctx, s, scanBatch, `SELECT `+batchColumns+` FROM batches ORDER BY started_at DESC, id DESC`)
}

const itemColumns = `batch_id, idx, repeat, item_key, item, run_id, status, scores, reasoning, checks, error, class, cost_usd, tokens, duration_ms, updated_at`

// BatchItems lists a batch's items in dataset order. An item recorded as
// running while no live process holds its batch is interrupted.
func (s *Store) BatchItems(ctx context.Context, batchID string) ([]*BatchItem, error) {
	var pid int
	var pidStart string
	err := s.db.QueryRowContext(ctx, `SELECT pid, pid_start FROM batches WHERE id = ?`, batchID).Scan(&pid, &pidStart)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	held := alive(pid, pidStart)
	rows, err := s.db.QueryContext(ctx, `SELECT `+itemColumns+` FROM batch_items WHERE batch_id = ? ORDER BY idx, repeat`, batchID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*BatchItem
	for rows.Next() {
		var it BatchItem
		var item string
		var run, scores, updated sql.NullString
		var reasoning, checks string
		if err := rows.Scan(&it.Batch, &it.Index, &it.Repeat, &it.Key, &item, &run, &it.Status, &scores, &reasoning, &checks, &it.Error, &it.Class,
			&it.CostUSD, &it.Tokens, &it.DurationMS, &updated); err != nil {
			return nil, err
		}
		it.Item, it.Run, it.Updated = decodeMap(item), run.String, parseTime(updated)
		if it.Status == runtime.StatusRunning && !held {
			it.Status = runtime.StatusInterrupted
		}
		if scores.Valid {
			it.Scores = decodeMap(scores.String)
		}
		for k, v := range decodeMap(reasoning) {
			if text, ok := v.(string); ok {
				if it.Reasoning == nil {
					it.Reasoning = map[string]string{}
				}
				it.Reasoning[k] = text
			}
		}
		if checks != "{}" {
			// FinishItem wrote it from a map, so it decodes.
			_ = json.Unmarshal([]byte(checks), &it.Checks)
		}
		out = append(out, &it)
	}
	return out, rows.Err()
}

// StartItem links an item's run (repeat, from 0) to the run that computes
// it. An item keeps the first run it was given: starting it again (a
// resumed batch) must pass that same run.
func (s *Store) StartItem(ctx context.Context, batchID string, index, repeat int, runID string) error {
	if err := s.intact(); err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, `UPDATE batch_items SET run_id = ?, status = ?, updated_at = ?
		WHERE batch_id = ? AND idx = ? AND repeat = ? AND (run_id IS NULL OR run_id = ?)`, runID, runtime.StatusRunning, now(), batchID, index, repeat, runID)
	if err != nil {
		return fmt.Errorf("run store %s: %w", s.path, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("batch %s: item %d (repeat %d) already has another run", batchID, index, repeat)
	}
	return s.intact()
}

// FinishItem records what an item's run gave. Recording it twice keeps
// the last: an item has exactly one result.
func (s *Store) FinishItem(ctx context.Context, it *BatchItem) error {
	var scores any
	if it.Scores != nil {
		b, err := json.Marshal(it.Scores)
		if err != nil {
			return fmt.Errorf("batch %s: item %s: scores: %w", it.Batch, it.Key, err)
		}
		scores = string(b)
	}
	reasoning := []byte("{}")
	if len(it.Reasoning) > 0 {
		b, err := json.Marshal(it.Reasoning)
		if err != nil {
			return fmt.Errorf("batch %s: item %s: reasoning: %w", it.Batch, it.Key, err)
		}
		reasoning = redact.JSON(b)
	}
	checks := []byte("{}")
	if len(it.Checks) > 0 {
		b, err := json.Marshal(it.Checks)
		if err != nil {
			return fmt.Errorf("batch %s: item %s: checks: %w", it.Batch, it.Key, err)
		}
		checks = redact.JSON(b)
	}
	if err := s.intact(); err != nil {
		return err
	}
	_, err := s.db.ExecContext(ctx, `UPDATE batch_items SET status = ?, scores = ?, reasoning = ?, checks = ?, error = ?, class = ?, cost_usd = ?, tokens = ?,
		duration_ms = ?, updated_at = ? WHERE batch_id = ? AND idx = ? AND repeat = ?`,
		it.Status, scores, string(reasoning), string(checks), redact.String(it.Error), it.Class, it.CostUSD, it.Tokens, it.DurationMS, now(), it.Batch, it.Index, it.Repeat)
	if err != nil {
		return fmt.Errorf("run store %s: %w", s.path, err)
	}
	return s.intact()
}

// ClaimBatch makes this process the holder of a batch about to resume; it
// fails with *InProgressError while another live process holds it.
func (s *Store) ClaimBatch(ctx context.Context, id string) error {
	var pid int
	var start string
	if err := s.db.QueryRowContext(ctx, `SELECT pid, pid_start FROM batches WHERE id = ?`, id).Scan(&pid, &start); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: no batch %q in %s", ErrNotFound, id, s.path)
		}
		return err
	}
	if pid != 0 && pid != os.Getpid() && alive(pid, start) {
		return &InProgressError{Run: id, PID: pid}
	}
	if err := s.intact(); err != nil {
		return err
	}
	_, err := s.db.ExecContext(ctx, `UPDATE batches SET status = ?, reason = '', pid = ?, pid_start = ?, updated_at = ?, finished_at = NULL WHERE id = ?`,
		runtime.StatusRunning, os.Getpid(), processStart(os.Getpid()), now(), id)
	if err != nil {
		return fmt.Errorf("run store %s: %w", s.path, err)
	}
	return s.intact()
}

// LabelBatch sets what a person calls batch id, replacing its label and
// description.
func (s *Store) LabelBatch(ctx context.Context, id, label, description string) error {
	if err := s.intact(); err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, `UPDATE batches SET label = ?, description = ? WHERE id = ?`, redact.String(label), redact.String(description), id)
	if err != nil {
		return fmt.Errorf("run store %s: %w", s.path, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return &NotFoundError{What: "batch", Ref: id, Path: s.path}
	}
	return s.intact()
}

// FinishBatch records how a batch attempt ended and releases it.
func (s *Store) FinishBatch(ctx context.Context, id string, status runtime.Status, reason string) error {
	if err := s.intact(); err != nil {
		return err
	}
	t := now()
	_, err := s.db.ExecContext(ctx, `UPDATE batches SET status = ?, reason = ?, pid = 0, pid_start = '', updated_at = ?, finished_at = ? WHERE id = ?`,
		status, redact.String(reason), t, t, id)
	if err != nil {
		return fmt.Errorf("run store %s: %w", s.path, err)
	}
	return s.intact()
}
