package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flowrun/flowrun/journal"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/redact"
	"github.com/flowrun/flowrun/runtime"
)

// Run is one run's record.
type Run struct {
	ID           string
	Pipeline     string // path as given
	PipelineAbs  string
	PipelineName string
	PipelineHash string
	PipelineSrc  string
	// PipelineFiles are the files the pipeline's load read (prompts,
	// schemas, called pipelines, the pipeline itself), by path.
	PipelineFiles map[string]string
	Status        runtime.Status
	Inputs        map[string]any
	// RemoteInputs: a remote caller gave the inputs (see
	// runtime.Options.RemoteInputs).
	RemoteInputs bool
	Outputs      map[string]any
	Error        string
	Reason       string
	CostUSD      float64
	Tokens       int
	Steps        int
	ParentRun    string
	ParentSeq    int64
	// ChildOf is the run this one serves (a judge's run: the item's run
	// it scores). A child run is listed under it, never on its own, and
	// "last" never names it.
	ChildOf string
	// Pending is the question a waiting run asks, or the confirmation a
	// stopped run was refused (answering yes on resume runs the node); nil
	// when there is none.
	Pending *runtime.Question
	// Spec is how the run was started, beyond its pipeline and inputs.
	Spec     RunSpec
	PID      int
	Started  time.Time
	Updated  time.Time
	Finished time.Time
}

// RunSpec is how a run was started beyond its pipeline and inputs (see
// journal.Spec): the store keeps it as JSON in the run's row.
type RunSpec = journal.Spec

// ErrNotFound is returned for an unknown run id.
var ErrNotFound = errors.New("no such run")

// InProgressError says another live process holds the run.
type InProgressError struct {
	Run string
	PID int
}

func (e *InProgressError) Error() string {
	return fmt.Sprintf("run %s is in progress in pid %d", e.Run, e.PID)
}

// Is makes the error journal.ErrClaimed: the store is a journal's.
func (e *InProgressError) Is(target error) bool { return target == journal.ErrClaimed }

// CreateRun records a new run, held by this process.
func (s *Store) CreateRun(ctx context.Context, r *Run) error {
	inputs, err := json.Marshal(r.Inputs)
	if err != nil {
		return fmt.Errorf("run %s: inputs: %w", r.ID, err)
	}
	t := now()
	files, err := json.Marshal(r.PipelineFiles)
	if err != nil {
		return fmt.Errorf("run %s: pipeline files: %w", r.ID, err)
	}
	spec, err := json.Marshal(r.Spec)
	if err != nil {
		return fmt.Errorf("run %s: spec: %w", r.ID, err)
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO runs (id, pipeline, pipeline_abs, pipeline_name, pipeline_hash, pipeline_src, pipeline_files,
		status, inputs, remote_inputs, parent_run, parent_seq, pid, pid_start, started_at, updated_at, spec, child_of)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULLIF(?, ''), ?, ?, ?, ?, ?, ?, NULLIF(?, ''))`,
		r.ID, r.Pipeline, r.PipelineAbs, r.PipelineName, r.PipelineHash, redact.String(r.PipelineSrc), string(redact.JSON(files)), runtime.StatusRunning, string(redact.JSON(inputs)),
		r.RemoteInputs, r.ParentRun, nullSeq(r.ParentRun, r.ParentSeq), os.Getpid(), processStart(os.Getpid()), t, t, string(redact.JSON(spec)), r.ChildOf)
	if err != nil {
		return fmt.Errorf("run %s: %w", r.ID, err)
	}
	r.Status, r.PID = runtime.StatusRunning, os.Getpid()
	return nil
}

// SetSpec records a change to how run id goes on: a resume given another
// model override, auto-advance switched on a page.
func (s *Store) SetSpec(ctx context.Context, id string, spec RunSpec) error {
	b, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("run %s: spec: %w", id, err)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE runs SET spec = ? WHERE id = ?`, string(redact.JSON(b)), id)
	if err != nil {
		return fmt.Errorf("run %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return s.notFound(ctx, id)
	}
	return nil
}

func nullSeq(parent string, seq int64) any {
	if parent == "" {
		return nil
	}
	return seq
}

const (
	runColumns = runHead + `pipeline_src, pipeline_files` + runTail
	// listColumns leave out the pipeline's source files, the bulk of a
	// run's record, for lists read often.
	listColumns = runHead + `'', 'null'` + runTail
	runHead     = `id, pipeline, pipeline_abs, pipeline_name, pipeline_hash, `
	runTail     = `, status, inputs, outputs, error, reason,
	cost_usd, tokens, steps, parent_run, parent_seq, pending, pid, pid_start, started_at, updated_at, finished_at, remote_inputs, spec, child_of`
)

func scanRun(row interface{ Scan(...any) error }) (*Run, error) {
	var r Run
	var inputs, files, pidStart, spec string
	var outputs, parent, pending, started, updated, finished, childOf sql.NullString
	var parentSeq sql.NullInt64
	err := row.Scan(&r.ID, &r.Pipeline, &r.PipelineAbs, &r.PipelineName, &r.PipelineHash, &r.PipelineSrc, &files, &r.Status, &inputs,
		&outputs, &r.Error, &r.Reason, &r.CostUSD, &r.Tokens, &r.Steps, &parent, &parentSeq, &pending, &r.PID, &pidStart,
		&started, &updated, &finished, &r.RemoteInputs, &spec, &childOf)
	if err != nil {
		return nil, err
	}
	if r.Status == runtime.StatusRunning && !alive(r.PID, pidStart) {
		r.Status = runtime.StatusInterrupted
		r.Reason = fmt.Sprintf("the process that ran it (pid %d) ended without recording how the run ended", r.PID)
	}
	r.Inputs = decodeMap(inputs)
	if err := json.Unmarshal([]byte(spec), &r.Spec); err != nil {
		return nil, fmt.Errorf("run %s: spec: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(files), &r.PipelineFiles); err != nil {
		return nil, fmt.Errorf("run %s: pipeline files: %w", r.ID, err)
	}
	if outputs.Valid {
		r.Outputs = decodeMap(outputs.String)
	}
	if pending.Valid {
		if err := json.Unmarshal([]byte(pending.String), &r.Pending); err != nil {
			return nil, fmt.Errorf("run %s: pending question: %w", r.ID, err)
		}
	}
	r.ParentRun, r.ParentSeq, r.ChildOf = parent.String, parentSeq.Int64, childOf.String
	r.Started, r.Updated, r.Finished = parseTime(started), parseTime(updated), parseTime(finished)
	return &r, nil
}

func decodeMap(s string) map[string]any {
	v, err := jsonvalue.Decode([]byte(s))
	if err != nil {
		return nil
	}
	m, _ := v.(map[string]any)
	return m
}

// Run returns one run. An unknown id gets ErrNotFound, naming close ids.
func (s *Store) Run(ctx context.Context, id string) (*Run, error) {
	r, err := scanRun(s.db.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, s.notFound(ctx, id)
	}
	return r, err
}

// notFound says there is no run id and names the runs the user may have
// meant (see similar).
func (s *Store) notFound(ctx context.Context, id string) error {
	return &NotFoundError{What: "run", Ref: id, Path: s.path, Similar: s.similar(ctx, "runs", id)}
}

// similar returns up to five ids of table (runs or batches), newest
// first, that the user may have meant by id: those that contain it, else
// those that share the longest start with it (a mistyped character).
func (s *Store) similar(ctx context.Context, table, id string) []string {
	if id == "" {
		return nil
	}
	all, err := queryAll(ctx, s, func(row interface{ Scan(...any) error }) (string, error) {
		var x string
		return x, row.Scan(&x)
	}, `SELECT id FROM `+table+` ORDER BY started_at DESC, id DESC`)
	if err != nil {
		return nil
	}
	var ids []string
	for _, x := range all {
		if strings.Contains(x, id) && len(ids) < 5 {
			ids = append(ids, x)
		}
	}
	if len(ids) == 0 {
		ids = longestShared(id, all)
	}
	return ids
}

// longestShared returns up to five ids that share the longest start with
// ref, when that start is at least two thirds of ref.
func longestShared(ref string, ids []string) []string {
	best, out := 0, []string(nil)
	for _, x := range ids {
		n := 0
		for n < len(ref) && n < len(x) && ref[n] == x[n] {
			n++
		}
		switch {
		case n > best:
			best, out = n, []string{x}
		case n == best && n > 0 && len(out) < 5:
			out = append(out, x)
		}
	}
	if best*3 < len(ref)*2 {
		return nil
	}
	return out
}

// Runs lists runs, newest first, without their pipelines' source files
// (PipelineSrc and PipelineFiles are empty; Run reads them).
func (s *Store) Runs(ctx context.Context) ([]*Run, error) {
	return queryAll(ctx, s, scanRun, `SELECT `+listColumns+` FROM runs ORDER BY started_at DESC, id DESC`)
}

// queryAll runs a query and scans each row with scan.
func queryAll[T any](ctx context.Context, s *Store, scan func(interface{ Scan(...any) error }) (T, error), q string, args ...any) ([]T, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		x, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, rows.Err()
}

// Claim makes this process the holder of a run about to resume. It fails
// with *InProgressError while another live process holds it; a run whose
// process died (killed, crashed) can be claimed.
func (s *Store) Claim(ctx context.Context, id string) (*Run, error) {
	// Checkpoints a killed holder journaled go in first: the resume that
	// follows restores them, and numbers its own after them.
	if err := s.settle(ctx, id); err != nil {
		return nil, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	r, err := scanRun(tx.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, s.notFound(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	if r.Status == runtime.StatusRunning && r.PID != os.Getpid() {
		return nil, &InProgressError{Run: id, PID: r.PID}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = ?, pid = ?, pid_start = ?, stop_requested = '', updated_at = ?, finished_at = NULL WHERE id = ?`,
		runtime.StatusRunning, os.Getpid(), processStart(os.Getpid()), now(), id); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	r.Status, r.PID = runtime.StatusRunning, os.Getpid()
	return r, nil
}

// Ending is how a run attempt ended (see journal.Ending).
type Ending = journal.Ending

// Finish records how a run attempt ended and releases the run.
func (s *Store) Finish(ctx context.Context, id string, e Ending) error {
	var outputs, pending any
	if e.Outputs != nil {
		b, err := json.Marshal(e.Outputs)
		if err != nil {
			return fmt.Errorf("run %s: outputs: %w", id, err)
		}
		outputs = string(redact.JSON(b))
	}
	if e.Pending != nil {
		b, err := json.Marshal(e.Pending)
		if err != nil {
			return fmt.Errorf("run %s: pending question: %w", id, err)
		}
		pending = string(redact.JSON(b))
	}
	if err := s.intact(); err != nil {
		return err
	}
	t := now()
	_, err := s.db.ExecContext(ctx, `UPDATE runs SET status = ?, outputs = ?, error = ?, reason = ?, steps = ?, cost_usd = ?, tokens = ?,
		pending = ?, pid = 0, pid_start = '', stop_requested = '', updated_at = ?, finished_at = ? WHERE id = ?`,
		e.Status, outputs, redact.String(e.Error), redact.String(e.Reason), e.Steps, e.CostUSD, e.Tokens, pending, t, t, id)
	if err != nil {
		return fmt.Errorf("run store %s: %w", s.path, err)
	}
	return s.intact()
}

// Prune deletes runs that started before the cutoff and are not running
// (interrupted ones go), with their checkpoints, events, snapshots and
// the values only they shared. It returns how many went.
func (s *Store) Prune(ctx context.Context, before time.Time) (int, error) {
	cutoff := before.UTC().Format(time.RFC3339Nano)
	// One transaction: a run cannot be claimed between being seen
	// interrupted and being deleted.
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT `+runColumns+` FROM runs WHERE started_at < ? AND status = ?`, cutoff, runtime.StatusRunning)
	if err != nil {
		return 0, err
	}
	keep := []string{}
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			rows.Close()
			return 0, err
		}
		if r.Status == runtime.StatusRunning {
			keep = append(keep, r.ID)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, err
	}
	ids, err := json.Marshal(keep)
	if err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE started_at < ? AND id NOT IN (SELECT value FROM json_each(?))`, cutoff, string(ids))
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	if _, err := s.db.ExecContext(ctx, `DELETE FROM shared_values WHERE hash NOT IN (SELECT hash FROM value_refs)`); err != nil {
		return int(n), err
	}
	if err := s.dropJournals(ctx); err != nil {
		return int(n), err
	}
	return int(n), nil
}

// RunQuery selects runs for a listing; its zero value selects every run
// that is neither a batch item nor a child run.
type RunQuery struct {
	Pipeline string // the pipeline's path as given, absolute path or name
	// PipelineFile is a pipeline file or name as a person gives it: a
	// file that exists here matches the runs of it by its absolute path,
	// whatever path they were started with; anything else matches as
	// Pipeline does.
	PipelineFile string
	Status       runtime.Status
	// Batch keeps only the runs of this batch's items (a batch id);
	// otherwise BatchItems says whether batch items are listed at all.
	Batch      string
	BatchItems bool
	// After and Before keep the runs started in that span (either may be
	// zero).
	After, Before time.Time
	IDPrefix      string // runs whose id starts so
	Parent        string // runs forked from this run
	ChildOf       string // the child runs of this run (none: only runs that are no child)
	Text          string // runs whose inputs hold this text, in any case
	Limit         int    // the newest this many; 0 for all
	Offset        int    // skipped before the Limit, for pages
}

// like is a LIKE pattern matching s literally, with % around it when
// anywhere; the pattern's escape character is \.
func like(s string, anywhere bool) string {
	s = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
	if anywhere {
		return "%" + s + "%"
	}
	return s + "%"
}

// pipelineFile is what a RunQuery's PipelineFile matches: the absolute
// path of a file that exists (runs record the path as given and as an
// absolute path), else file as given.
func pipelineFile(file string) string {
	if _, err := os.Stat(file); file == "" || err != nil {
		return file
	}
	if abs, err := filepath.Abs(file); err == nil {
		return abs
	}
	return file
}

// filter is the SQL condition (WHERE ...) and its arguments for q's
// filters on the runs table, batch membership and child runs included
// when items is set (the batches table shares the rest).
func (q RunQuery) filter(items bool) (string, []any) {
	var where []string
	var args []any
	for _, p := range []string{q.Pipeline, pipelineFile(q.PipelineFile)} {
		if p != "" {
			where = append(where, `(pipeline = ? OR pipeline_abs = ? OR pipeline_name = ?)`)
			args = append(args, p, p, p)
		}
	}
	if q.Status != "" {
		where = append(where, `status = ?`)
		args = append(args, q.Status)
	}
	if !q.After.IsZero() {
		where = append(where, `started_at >= ?`)
		args = append(args, q.After.UTC().Format(time.RFC3339Nano))
	}
	if !q.Before.IsZero() {
		where = append(where, `started_at < ?`)
		args = append(args, q.Before.UTC().Format(time.RFC3339Nano))
	}
	if q.IDPrefix != "" {
		where = append(where, `id LIKE ? ESCAPE '\'`)
		args = append(args, like(q.IDPrefix, false))
	}
	if q.Parent != "" {
		where = append(where, `parent_run = ?`)
		args = append(args, q.Parent)
	}
	if q.Text != "" {
		where = append(where, `inputs LIKE ? ESCAPE '\'`)
		args = append(args, like(q.Text, true))
	}
	switch {
	case !items:
	case q.ChildOf != "":
		where = append(where, `child_of = ?`)
		args = append(args, q.ChildOf)
	default:
		where = append(where, `child_of IS NULL`)
	}
	switch {
	case !items:
	case q.Batch != "":
		where = append(where, `id IN (SELECT run_id FROM batch_items WHERE batch_id = ?)`)
		args = append(args, q.Batch)
	case !q.BatchItems:
		where = append(where, `id NOT IN (SELECT run_id FROM batch_items WHERE run_id IS NOT NULL)`)
	}
	if len(where) == 0 {
		return "", nil
	}
	return ` WHERE ` + strings.Join(where, ` AND `), args
}

// page is the LIMIT and OFFSET clause of q.
func (q RunQuery) page() string {
	if q.Limit <= 0 {
		return ""
	}
	return fmt.Sprintf(` LIMIT %d OFFSET %d`, q.Limit, max(0, q.Offset))
}

// RunsMatching lists the runs q selects, newest first, and how many it
// selects in all (more than listed when Limit cuts the list).
func (s *Store) RunsMatching(ctx context.Context, q RunQuery) ([]*Run, int, error) {
	cond, args := q.filter(true)
	var total int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM runs`+cond, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("run store %s: counting runs: %w", s.path, err)
	}
	runs, err := queryAll(ctx, s, scanRun, `SELECT `+listColumns+` FROM runs`+cond+` ORDER BY started_at DESC, id DESC`+q.page(), args...)
	if err != nil {
		return nil, 0, fmt.Errorf("run store %s: listing runs: %w", s.path, err)
	}
	return runs, total, nil
}
