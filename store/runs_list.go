package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/flowrun/flowrun/runtime"
)

// ListOrder is how RunList sorts: By "start" (the default), "duration",
// "cost" or "tokens", newest or largest first unless Asc.
type ListOrder struct {
	By  string
	Asc bool
}

// Listed is one line of the runs list: a run, or a batch standing for
// its items' runs.
type Listed struct {
	Run   *Run
	Batch *BatchLine
}

// BatchLine is a batch as one line of the runs list: its record, and its
// items counted by status with what they spent.
type BatchLine struct {
	*Batch
	Items   int
	Counts  map[runtime.Status]int
	CostUSD float64
	Tokens  int
}

// sortKeys are the SQL expressions RunList sorts by, over the columns
// both of its parts name alike.
var sortKeys = map[string]string{"start": "t", "duration": "dur", "cost": "cost", "tokens": "tok"}

// RunList is one page of the runs list q selects, in order o, and how
// many lines the list has in all. Unless q asks for batch items (Batch
// or BatchItems), each batch is one line (when it matches q's pipeline,
// status, time, id prefix, or has an item whose dataset row holds q's
// text) among the runs that belong to no batch. Filtering, sorting and
// paging happen in SQL: a page reads its own lines only.
func (s *Store) RunList(ctx context.Context, q RunQuery, o ListOrder) ([]Listed, int, error) {
	cond, args := q.filter(true)
	union := `SELECT 'run' AS kind, id, started_at AS t, cost_usd AS cost, tokens AS tok,
		julianday(COALESCE(finished_at, updated_at)) - julianday(started_at) AS dur FROM runs` + cond
	if q.Batch == "" && !q.BatchItems {
		bcond, bargs := q.batchFilter()
		union += ` UNION ALL SELECT 'batch', id, started_at,
			(SELECT COALESCE(sum(cost_usd), 0) FROM batch_items i WHERE i.batch_id = b.id),
			(SELECT COALESCE(sum(tokens), 0) FROM batch_items i WHERE i.batch_id = b.id),
			julianday(COALESCE(finished_at, updated_at)) - julianday(started_at) FROM batches b` + bcond
		args = append(args, bargs...)
	}
	var total int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM (`+union+`)`, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("run store %s: counting the runs list: %w", s.path, err)
	}
	key := sortKeys[o.By]
	if key == "" {
		key = "t"
	}
	dir := "DESC"
	if o.Asc {
		dir = "ASC"
	}
	type line struct{ kind, id string }
	lines, err := queryAll(ctx, s, func(row interface{ Scan(...any) error }) (line, error) {
		var l line
		err := row.Scan(&l.kind, &l.id)
		return l, err
	}, `SELECT kind, id FROM (`+union+`) ORDER BY `+key+` `+dir+`, id `+dir+q.page(), args...)
	if err != nil {
		return nil, 0, fmt.Errorf("run store %s: listing runs: %w", s.path, err)
	}
	var runIDs, batchIDs []any
	for _, l := range lines {
		if l.kind == "run" {
			runIDs = append(runIDs, l.id)
		} else {
			batchIDs = append(batchIDs, l.id)
		}
	}
	runs, err := s.runsByID(ctx, runIDs)
	if err != nil {
		return nil, 0, err
	}
	batches, err := s.batchLines(ctx, batchIDs)
	if err != nil {
		return nil, 0, err
	}
	out := make([]Listed, 0, len(lines))
	for _, l := range lines {
		// A line deleted between the two reads (pruned) is left out.
		if r := runs[l.id]; l.kind == "run" && r != nil {
			out = append(out, Listed{Run: r})
		} else if b := batches[l.id]; l.kind == "batch" && b != nil {
			out = append(out, Listed{Batch: b})
		}
	}
	return out, total, nil
}

// batchFilter is q's filter on the batches table: its text is looked
// for in the items' dataset rows.
func (q RunQuery) batchFilter() (string, []any) {
	text := q.Text
	q.Text = ""
	cond, args := q.filter(false)
	if text == "" {
		return cond, args
	}
	match := `EXISTS (SELECT 1 FROM batch_items i WHERE i.batch_id = b.id AND i.item LIKE ? ESCAPE '\')`
	if cond == "" {
		return ` WHERE ` + match, []any{like(text, true)}
	}
	return cond + ` AND ` + match, append(args, like(text, true))
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

func (s *Store) runsByID(ctx context.Context, ids []any) (map[string]*Run, error) {
	out := map[string]*Run{}
	if len(ids) == 0 {
		return out, nil
	}
	runs, err := queryAll(ctx, s, scanRun, `SELECT `+listColumns+` FROM runs WHERE id IN (`+placeholders(len(ids))+`)`, ids...)
	if err != nil {
		return nil, fmt.Errorf("run store %s: reading runs: %w", s.path, err)
	}
	for _, r := range runs {
		out[r.ID] = r
	}
	return out, nil
}

func (s *Store) batchLines(ctx context.Context, ids []any) (map[string]*BatchLine, error) {
	out := map[string]*BatchLine{}
	if len(ids) == 0 {
		return out, nil
	}
	batches, err := queryAll(ctx, s, scanBatch, `SELECT `+batchColumns+` FROM batches WHERE id IN (`+placeholders(len(ids))+`)`, ids...)
	if err != nil {
		return nil, fmt.Errorf("run store %s: reading batches: %w", s.path, err)
	}
	for _, b := range batches {
		out[b.ID] = &BatchLine{Batch: b, Counts: map[runtime.Status]int{}}
	}
	rows, err := s.db.QueryContext(ctx, `SELECT batch_id, status, count(*), sum(cost_usd), sum(tokens) FROM batch_items
		WHERE batch_id IN (`+placeholders(len(ids))+`) GROUP BY batch_id, status`, ids...)
	if err != nil {
		return nil, fmt.Errorf("run store %s: counting batch items: %w", s.path, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var status runtime.Status
		var n, tokens int
		var cost float64
		if err := rows.Scan(&id, &status, &n, &cost, &tokens); err != nil {
			return nil, fmt.Errorf("run store %s: counting batch items: %w", s.path, err)
		}
		if b := out[id]; b != nil {
			b.Counts[status] += n
			b.Items += n
			b.CostUSD += cost
			b.Tokens += tokens
		}
	}
	return out, rows.Err()
}

// PipelineNames lists the names of the pipelines the store has runs or
// batches of, sorted.
func (s *Store) PipelineNames(ctx context.Context) ([]string, error) {
	names, err := queryAll(ctx, s, func(row interface{ Scan(...any) error }) (string, error) {
		var n string
		err := row.Scan(&n)
		return n, err
	}, `SELECT pipeline_name FROM runs UNION SELECT pipeline_name FROM batches ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("run store %s: listing pipeline names: %w", s.path, err)
	}
	return names, nil
}
