package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/redact"
	"github.com/flowrun/flowrun/runtime"
)

// Grouping: checkpoints and events wait in memory (or, once durable, in
// the journal) and are committed to the database in groups of at most
// defaultGroupMax checkpoints, at most defaultGroupDelay after the first.
const (
	defaultGroupMax   = 1024
	defaultGroupDelay = 10 * time.Millisecond
)

// Recorder writes one run's events and checkpoints.
//
// A checkpoint that is not Pure (the node called a model, a tool or code,
// or asked a person) is durable before Save returns, together with every
// checkpoint before it: a resume never does such a node again. Durable
// means appended to the run's checkpoint journal, one write(2) beside the
// database (see journal.go), which survives the process being killed as a
// commit in WAL mode with synchronous=NORMAL does; checkpoints of nodes
// that finish at the same time (map items, parallel branches) share that
// write. Pure checkpoints (set, branch, and the bookkeeping of loop, map,
// parallel and call nodes) wait in memory until the next checkpoint that
// is not pure. Checkpoints are always made durable in order, so the
// durable ones are a prefix of the run's history: a process killed loses
// only pure checkpoints that came after the last durable one, and a resume
// runs those nodes again, which has no effect outside the run.
//
// Everything is moved into the database in groups: one transaction at
// most defaultGroupDelay after the first checkpoint or event waiting, or
// once defaultGroupMax checkpoints wait, and at Flush, when the run ends,
// fails, stops or waits. A journal left by a killed process is moved in by
// whoever next reads the run's checkpoints (Store.settle).
//
// Events are the run's timeline, not what a resume restores: they are not
// journaled, and a killed process loses the events of its last
// milliseconds.
//
// The recorder writes through one connection of its own, with its
// statements prepared once, from its first commit until Flush.
type Recorder struct {
	s   *Store
	run string

	mu         sync.Mutex
	done       sync.Cond // broadcast when a commit ends
	committing bool      // a commit is being written, without mu held
	journaling bool      // a journal write is under way, without mu held
	buf        []runtime.Event
	pending    []pendingCheckpoint // saved, not durable yet
	journaled  []pendingCheckpoint // durable in a journal, not yet in the database
	j          *journalFile        // where checkpoints are journaled
	full       []*journalFile      // earlier journals, deleted once their checkpoints are in the database
	spareBuf   []runtime.Event     // emptied slices, for reuse
	spareCps   []pendingCheckpoint
	event      int64 // last event seq committed
	cpSeq      int64 // last checkpoint seq given, pending and discarded ones included
	durable    int64 // every checkpoint up to this seq is in a journal or the database
	timer      *time.Timer
	armed      bool  // the timer will commit what is buffered
	failed     error // a timed commit's failure, reported by the next Save or Flush
	w          *writer
	writes     int    // journal writes, for tests
	testHook   func() // called before a journal write, for tests

	groupMax   int
	groupDelay time.Duration
}

type pendingCheckpoint struct {
	seq     int64
	path    string
	data    string // as journaled
	created string
	// row, when set, is data as the database stores it, with the values
	// it refers to (see shared.go).
	row    string
	values []value
}

// Recorder returns the recorder for a run, continuing its event and
// checkpoint sequences.
func (s *Store) Recorder(ctx context.Context, runID string) (*Recorder, error) {
	if err := s.settle(ctx, runID); err != nil {
		return nil, err
	}
	r := &Recorder{s: s, run: runID, groupMax: defaultGroupMax, groupDelay: defaultGroupDelay}
	r.done.L = &r.mu
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?`, runID).Scan(&r.event); err != nil {
		return nil, err
	}
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM checkpoints WHERE run_id = ?`, runID).Scan(&r.cpSeq); err != nil {
		return nil, err
	}
	r.durable = r.cpSeq
	return r, nil
}

// Event buffers an event.
func (r *Recorder) Event(e runtime.Event) {
	r.mu.Lock()
	r.buf = append(r.buf, e)
	r.arm()
	r.mu.Unlock()
}

// arm makes the timer commit what is buffered groupDelay from now, unless
// it is already due to.
func (r *Recorder) arm() {
	if r.armed {
		return
	}
	r.armed = true
	if r.timer == nil {
		r.timer = time.AfterFunc(r.groupDelay, r.timed)
	} else {
		r.timer.Reset(r.groupDelay)
	}
}

// Save records a checkpoint, durable with the checkpoints before it when
// it returns unless cp.Pure (see Recorder). It numbers checkpoints itself,
// after any a rollback discarded, so that a run's history is never
// overwritten.
func (r *Recorder) Save(ctx context.Context, cp *runtime.Checkpoint) error {
	wait, err := r.Add(ctx, cp)
	if err != nil {
		return err
	}
	return wait()
}

// Add is Save in two halves (runtime.GroupCheckpointer): it numbers and
// keeps the checkpoint, and the function it returns waits until the
// checkpoint is durable as Save would have it. The runtime calls Add in
// sequence order and the waits concurrently, so that the checkpoints of
// nodes that finish together are made durable by one write.
func (r *Recorder) Add(ctx context.Context, cp *runtime.Checkpoint) (wait func() error, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.failed; err != nil {
		return nil, err
	}
	cp.Seq = r.cpSeq + 1
	data, err := json.Marshal(cp)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", cp.Path, err)
	}
	data = redact.JSON(data)
	pc := pendingCheckpoint{seq: cp.Seq, path: cp.Path, data: string(data), created: now()}
	if len(data) >= sharedMin {
		if pc.row, pc.values, err = shareStrings(data); err != nil {
			return nil, fmt.Errorf("checkpoint %s: %w", cp.Path, err)
		}
	}
	r.cpSeq = cp.Seq
	r.pending = append(r.pending, pc)
	if !cp.Pure {
		seq := cp.Seq
		return func() error { return r.wait(seq) }, nil
	}
	if len(r.pending)+len(r.journaled) >= r.groupMax {
		return noWait, r.commit(ctx, true)
	}
	r.arm()
	return noWait, nil
}

func noWait() error { return nil }

// wait returns once checkpoint seq is durable: it journals the pending
// checkpoints, its own among them, unless a write under way will. The
// write is made without mu held, so that the checkpoints of nodes
// finishing meanwhile gather for the next.
func (r *Recorder) wait(seq int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.durable < seq {
		if r.journaling {
			r.done.Wait()
			continue
		}
		if len(r.pending) == 0 || r.pending[0].seq > seq {
			// Never: a checkpoint stays pending until it is durable.
			return fmt.Errorf("checkpoint %d was not stored", seq)
		}
		if err := r.journalPending(true); err != nil {
			return err
		}
	}
	return nil
}

// journalPending makes the pending checkpoints durable with one write to
// the journal; with unlock set it releases mu while it writes. Called with
// mu held, no journal write or commit under way.
func (r *Recorder) journalPending(unlock bool) error {
	if len(r.pending) == 0 {
		return nil
	}
	if r.j == nil {
		j, err := r.s.openJournal(r.run)
		if err != nil {
			return err
		}
		r.j = j
	}
	batch, j := r.pending, r.j
	var err error
	if unlock {
		r.pending, r.spareCps = r.spareCps, nil
		r.journaling = true
		r.mu.Unlock()
		if r.testHook != nil {
			r.testHook()
		}
		err = j.append(batch)
		r.mu.Lock()
		r.journaling = false
		r.done.Broadcast()
		if err != nil {
			r.pending = append(batch, r.pending...)
			return err
		}
	} else {
		if err = j.append(batch); err != nil {
			return err
		}
		r.pending = r.spareCps
	}
	r.writes++
	r.durable = batch[len(batch)-1].seq
	r.journaled = append(r.journaled, batch...)
	clear(batch)
	r.spareCps = batch[:0]
	r.arm()
	return nil
}

// timed commits what has waited groupDelay.
func (r *Recorder) timed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armed = false
	if r.failed != nil {
		return
	}
	if err := r.commit(context.Background(), true); err != nil {
		r.failed = err
		return
	}
	if len(r.buf) > 0 || len(r.pending) > 0 || len(r.journaled) > 0 {
		r.arm() // what came in while the commit was written
	}
}

// Flush commits the buffered events and checkpoints, deletes the
// journals, and releases the recorder's connection. After a failure the
// journals stay, for the checkpoints they hold to be moved in later.
func (r *Recorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = nil
	err := r.commit(ctx, true)
	if r.armed {
		r.armed = false
		r.timer.Stop()
	}
	if r.j != nil {
		if err == nil && len(r.journaled) == 0 {
			err = r.j.remove()
		} else {
			err = errors.Join(err, r.j.abandon())
		}
		r.j = nil
	}
	for _, j := range r.full {
		err = errors.Join(err, j.abandon())
	}
	r.full = nil
	if r.w != nil {
		err = errors.Join(err, r.w.close())
		r.w = nil
	}
	return err
}

// commit moves what is saved into the database: the journaled and pending
// checkpoints, and the buffered events when all is set, in one
// transaction, after any commit under way. The pending checkpoints are
// journaled first and new ones go to a new journal, so that the durable
// checkpoints stay a prefix of the run's history whatever happens to
// the transaction; the old journal is deleted once it commits. commit is
// called with mu held and releases it while it writes. On failure what it
// took goes back, for the next commit.
func (r *Recorder) commit(ctx context.Context, all bool) error {
	for r.committing || r.journaling {
		r.done.Wait()
	}
	if err := r.journalPending(false); err != nil {
		return err
	}
	cps := r.journaled
	var events []runtime.Event
	if all {
		events = r.buf
	}
	if len(events) == 0 && len(cps) == 0 {
		return nil
	}
	if r.w == nil {
		// A checkpoint whose node has finished is worth recording even
		// when the run is being cancelled; the busy timeout bounds waits.
		w, err := r.s.newWriter(context.WithoutCancel(ctx))
		if err != nil {
			return err
		}
		r.w = w
	}
	if r.j != nil && len(cps) > 0 {
		// Its checkpoints are all in cps: the next ones go to a new journal.
		if err := r.j.close(); err != nil {
			return err
		}
		r.full = append(r.full, r.j)
		r.j = nil
	}
	files := r.full
	r.full = nil
	r.journaled, r.spareCps = r.spareCps, nil
	if all {
		r.buf, r.spareBuf = r.spareBuf, nil
	}
	r.committing = true
	base := r.event
	r.mu.Unlock()
	err := r.s.intact()
	if err == nil {
		if err = r.w.write(context.WithoutCancel(ctx), r.run, base, events, cps); err != nil {
			err = fmt.Errorf("run store %s: %w", r.s.path, err)
		} else {
			// A file truncated during the write took the commit with it.
			err = r.s.intact()
		}
	}
	if err == nil {
		for _, j := range files {
			// A journal left behind is harmless: settle keeps what the
			// database already has.
			_ = j.remove()
		}
		files = nil
	}
	r.mu.Lock()
	r.committing = false
	r.done.Broadcast()
	if err != nil {
		r.journaled = append(cps, r.journaled...)
		r.full = append(files, r.full...)
		if all {
			r.buf = append(events, r.buf...)
		}
		return err
	}
	r.event = base + int64(len(events))
	clear(cps)
	r.spareCps = cps[:0]
	if all {
		clear(events)
		r.spareBuf = events[:0]
	}
	if r.armed && len(r.buf) == 0 && len(r.pending) == 0 && len(r.journaled) == 0 {
		r.armed = false
		r.timer.Stop()
	}
	return nil
}

// write inserts events (numbered after seq) and checkpoints in one
// transaction.
func (w *writer) write(ctx context.Context, run string, seq int64, events []runtime.Event, cps []pendingCheckpoint) error {
	// Encode first, so that the write lock is held for the writes only.
	var values []value
	evRows := w.evArgs[:0]
	for _, e := range events {
		var row string
		var vs []value
		data, err := json.Marshal(e)
		if err == nil {
			row, vs, err = shareStrings(redact.JSON(data))
		}
		if err != nil {
			return fmt.Errorf("event %s %s: %w", e.Type, e.Path, err)
		}
		values = append(values, vs...)
		seq++
		evRows = append(evRows, run, seq, e.Type, e.Path, row)
	}
	cpRows := w.cpArgs[:0]
	for _, cp := range cps {
		row := cp.data
		if cp.row != "" {
			row = cp.row
			values = append(values, cp.values...)
		}
		cpRows = append(cpRows, run, cp.seq, cp.path, row, cp.created)
	}
	defer func() {
		clear(evRows)
		clear(cpRows)
		w.evArgs, w.cpArgs = evRows[:0], cpRows[:0]
	}()
	if _, err := w.begin.ExecContext(ctx); err != nil {
		return err
	}
	err := w.insert(ctx, w.events, evRows)
	if err == nil {
		err = w.insert(ctx, w.checkpoints, cpRows)
	}
	for _, v := range values {
		if err != nil {
			break
		}
		if _, err = w.value.ExecContext(ctx, v.hash, v.data); err == nil {
			_, err = w.valueRef.ExecContext(ctx, run, v.hash)
		}
	}
	if err == nil {
		_, err = w.commit.ExecContext(ctx)
	}
	if err != nil {
		_, _ = w.rollback.ExecContext(ctx)
		return err
	}
	return nil
}

// writer is a connection held for one recorder, with its statements.
type writer struct {
	conn                    *sql.Conn
	begin, commit, rollback *sql.Stmt
	value, valueRef         *sql.Stmt
	events, checkpoints     inserter
	evArgs, cpArgs          []any
}

// inserter inserts rows of five columns into a table: batchRows at a time
// with one statement, the rest one by one.
type inserter struct{ one, batch *sql.Stmt }

// batchRows is how many rows one multi-row INSERT writes: one statement per
// row costs more than the row itself.
const batchRows = 32

// insertColumns is how many columns inserter writes per row.
const insertColumns = 5

func (w *writer) insert(ctx context.Context, in inserter, args []any) error {
	const cols = insertColumns
	for len(args) >= batchRows*cols {
		if _, err := in.batch.ExecContext(ctx, args[:batchRows*cols]...); err != nil {
			return err
		}
		args = args[batchRows*cols:]
	}
	for len(args) > 0 {
		if _, err := in.one.ExecContext(ctx, args[:cols]...); err != nil {
			return err
		}
		args = args[cols:]
	}
	return nil
}

func (s *Store) newWriter(ctx context.Context) (*writer, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	w := &writer{conn: conn}
	values := func(n int) string {
		return strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?), ", n), ", ")
	}
	const events = `INSERT INTO events (run_id, seq, type, path, data) VALUES `
	const checkpoints = `INSERT INTO checkpoints (run_id, seq, path, data, created_at) VALUES `
	for _, st := range []struct {
		to  **sql.Stmt
		sql string
	}{
		// BEGIN IMMEDIATE takes the write lock at once, as _txlock=immediate
		// does for the store's other transactions.
		{&w.begin, `BEGIN IMMEDIATE`},
		{&w.commit, `COMMIT`},
		{&w.rollback, `ROLLBACK`},
		{&w.events.one, events + values(1)},
		{&w.events.batch, events + values(batchRows)},
		{&w.checkpoints.one, checkpoints + values(1)},
		{&w.checkpoints.batch, checkpoints + values(batchRows)},
		{&w.value, `INSERT OR IGNORE INTO shared_values (hash, data) VALUES (?, ?)`},
		{&w.valueRef, `INSERT OR IGNORE INTO value_refs (run_id, hash) VALUES (?, ?)`},
	} {
		if *st.to, err = conn.PrepareContext(ctx, st.sql); err != nil {
			w.close()
			return nil, err
		}
	}
	return w, nil
}

func (w *writer) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{w.begin, w.commit, w.rollback, w.value, w.valueRef, w.events.one, w.events.batch, w.checkpoints.one, w.checkpoints.batch} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	errs = append(errs, w.conn.Close())
	return errors.Join(errs...)
}

// Checkpoints returns a run's current checkpoints in order: those not
// discarded by a rollback, up to seq upTo (all when upTo is 0).
func (s *Store) Checkpoints(ctx context.Context, runID string, upTo int64) ([]*runtime.Checkpoint, error) {
	if err := s.settle(ctx, runID); err != nil {
		return nil, err
	}
	q := `SELECT data FROM checkpoints WHERE run_id = ? AND discarded = 0 ORDER BY seq`
	args := []any{runID}
	if upTo > 0 {
		q = `SELECT data FROM checkpoints WHERE run_id = ? AND discarded = 0 AND seq <= ? ORDER BY seq`
		args = append(args, upTo)
	}
	rows, err := s.texts(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	vs := &valueReader{db: s.db}
	out := make([]*runtime.Checkpoint, 0, len(rows))
	for _, data := range rows {
		data, err := vs.restore(ctx, data)
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", runID, err)
		}
		cp, err := decodeCheckpoint(data)
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", runID, err)
		}
		out = append(out, cp)
	}
	return out, nil
}

// texts returns the one text column of the rows a query selects. The
// rows are read to the end before the caller reads anything else.
func (s *Store) texts(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		out = append(out, data)
	}
	return out, rows.Err()
}

// decodeCheckpoint reads a checkpoint back with integral numbers as int,
// as the run produced them.
func decodeCheckpoint(data string) (*runtime.Checkpoint, error) {
	var cp runtime.Checkpoint
	if err := json.Unmarshal([]byte(data), &cp); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	v, err := jsonvalue.Decode([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	raw := v.(map[string]any)
	cp.Output = raw["output"]
	cp.State, _ = raw["state"].(map[string]any)
	cp.Nodes, _ = raw["nodes"].(map[string]any)
	return &cp, nil
}

// Events returns a run's events in order.
func (s *Store) Events(ctx context.Context, runID string) ([]runtime.Event, error) {
	events, _, err := s.EventsAfter(ctx, runID, 0)
	return events, err
}
