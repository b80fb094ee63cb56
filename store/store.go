// Package store keeps runs in an embedded SQLite database: each run's
// record, every checkpoint, every event and immutable snapshots. Several
// flowrun processes may use one database at once: writes are serialised by
// SQLite (WAL mode, busy timeout), and a run is held by one process at a
// time, which Claim enforces. While a run is recorded, its latest
// checkpoints may be in a journal file beside the database (DB.journal/,
// see Recorder) before they are moved in; the store moves in those a
// killed process left before anything reads them.
//
// A string of 16 KiB or more (a code node's stdout, a long reply) is
// stored once however many events and checkpoints hold it. Every text
// written is redacted first (package redact). A database file truncated,
// replaced or deleted under an open store is noticed at the next write,
// which fails with *LostError, as does every write after it.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver (pure Go, no cgo)
)

// DefaultPath is where runs are kept unless --store or FLOWRUN_STORE says
// otherwise: .flowrun/flowrun.db under the working directory.
func DefaultPath() string {
	if p := os.Getenv("FLOWRUN_STORE"); p != "" {
		return p
	}
	return filepath.Join(".flowrun", "flowrun.db")
}

// Store is an open run database.
type Store struct {
	db   *sql.DB
	path string
	// file is the database file as first opened, size the largest size it
	// was seen at, lost why it can no longer be trusted (see intact).
	file os.FileInfo
	size atomic.Int64
	lost atomic.Pointer[LostError]
	// readOnly: opened by OpenReadOnly; journals are not moved in.
	readOnly bool
}

// Open opens (creating if needed) the database at path and brings its
// schema up to date.
func Open(path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("run store %s: %w", path, err)
	}
	// synchronous=NORMAL in WAL mode survives a killed process (every
	// committed transaction is in the WAL); only a power loss can drop the
	// last commits. _txlock=immediate takes the write lock at BEGIN, so
	// read-then-write transactions never deadlock between processes.
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(ON)&_txlock=immediate"
	// Two processes creating the same new database at once can get
	// SQLITE_BUSY at once, without the busy timeout (switching a new file
	// to WAL needs an exclusive lock), so opening retries for a while.
	deadline := time.Now().Add(15 * time.Second)
	for attempt := 0; ; attempt++ {
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			return nil, fmt.Errorf("run store %s: %w", path, err)
		}
		s := &Store{db: db, path: path}
		err = s.migrate(context.Background())
		if err == nil {
			if s.file, err = os.Stat(path); err == nil {
				s.size.Store(s.file.Size())
				return s, nil
			}
		}
		db.Close()
		if !busy(err) || time.Now().After(deadline) {
			return nil, fmt.Errorf("run store %s: %w", path, err)
		}
		time.Sleep(time.Duration(10+rand.IntN(20*min(attempt+1, 10))) * time.Millisecond)
	}
}

// OpenReadOnly opens the database at path for commands that only read
// it (listing runs, showing one), writing nothing: not the file, not its
// directory, not the schema. It works on a file or directory flowrun may
// not write: when SQLite cannot create the WAL index beside the file, the
// file is read as immutable, which does not see what is still only in a
// WAL file (a run in progress in another process). Checkpoints that a
// killed process left in a journal are not moved in, so they are not
// read. A missing file is an error that wraps fs.ErrNotExist.
func OpenReadOnly(path string) (*Store, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("run store %s: %w", path, err)
	}
	var errs []error
	for _, params := range []string{"mode=ro&_pragma=busy_timeout(10000)", "mode=ro&immutable=1"} {
		db, err := sql.Open("sqlite", "file:"+path+"?"+params)
		if err == nil {
			s := &Store{db: db, path: path, readOnly: true}
			if err = s.readable(context.Background()); err == nil {
				return s, nil
			}
			db.Close()
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("run store %s: %w", path, errors.Join(errs...))
}

// readable checks that this build can read the database's schema.
func (s *Store) readable(ctx context.Context) error {
	var v int
	if err := s.db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v); err != nil {
		return err
	}
	return knownSchema(v)
}

// knownSchema checks that this build knows schema version v.
func knownSchema(v int) error {
	if v > len(migrations) {
		return fmt.Errorf("the database is from a newer flowrun (schema %d, this build knows %d)", v, len(migrations))
	}
	return nil
}

// LostError says the database file was truncated, replaced or deleted
// while this process had it open: what the process wrote since may be
// lost, and the file may be damaged. A store that saw this refuses to
// write.
type LostError struct {
	Path string
	What string // what happened to the file
}

func (e *LostError) Error() string {
	return fmt.Sprintf("run store %s: the database file %s while flowrun used it; what was written since may be lost and the file may be damaged", e.Path, e.What)
}

// intact checks that the database file is still the one opened and has
// not been cut, so that a file truncated or replaced under a writer is
// noticed before the writer reports success. SQLite's own checkpoints
// shrink the file by a little now and then (see checkpointSlack), so a
// cut is a file that lost its header or shrank by more than that. Once
// it fails it always fails.
func (s *Store) intact() error {
	if lost := s.lost.Load(); lost != nil {
		return lost
	}
	fi, err := os.Stat(s.path)
	var what string
	switch {
	case errors.Is(err, fs.ErrNotExist):
		what = "was deleted"
	case err != nil:
		return fmt.Errorf("run store %s: %w", s.path, err)
	case !os.SameFile(fi, s.file):
		what = "was replaced by another file"
	case fi.Size() < s.size.Load() && !withinSlack(s.path, s.size.Load()-fi.Size()):
		what = fmt.Sprintf("was truncated (from %d to %d bytes)", s.size.Load(), fi.Size())
	default:
		if fi.Size() > s.size.Load() {
			s.size.Store(fi.Size())
		}
		return nil
	}
	s.lost.CompareAndSwap(nil, &LostError{Path: s.path, What: what})
	return s.lost.Load()
}

// busy reports SQLite's "database is locked".
func busy(err error) bool {
	return strings.Contains(err.Error(), "SQLITE_BUSY") || strings.Contains(err.Error(), "database is locked")
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// migrations bring a database from version i to i+1. Never edit one that
// has shipped; add another.
var migrations = []string{
	`CREATE TABLE runs (
		id            TEXT PRIMARY KEY,
		pipeline      TEXT NOT NULL,  -- path as given on the command line
		pipeline_abs  TEXT NOT NULL,
		pipeline_name TEXT NOT NULL,
		pipeline_hash TEXT NOT NULL,
		pipeline_src  TEXT NOT NULL,  -- to say what changed when a resume finds the file edited
		status        TEXT NOT NULL,
		inputs        TEXT NOT NULL,
		outputs       TEXT,
		error         TEXT NOT NULL DEFAULT '',
		reason        TEXT NOT NULL DEFAULT '',
		cost_usd      REAL NOT NULL DEFAULT 0,
		tokens        INTEGER NOT NULL DEFAULT 0,
		steps         INTEGER NOT NULL DEFAULT 0,
		parent_run    TEXT REFERENCES runs(id) ON DELETE SET NULL,
		parent_seq    INTEGER,
		pending       TEXT,           -- the question a waiting run asks
		pid           INTEGER NOT NULL DEFAULT 0,
		pid_start     TEXT NOT NULL DEFAULT '',
		started_at    TEXT NOT NULL,
		updated_at    TEXT NOT NULL,
		finished_at   TEXT
	);
	CREATE INDEX runs_started ON runs(started_at);
	CREATE TABLE checkpoints (
		run_id     TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
		seq        INTEGER NOT NULL,
		path       TEXT NOT NULL,
		data       TEXT NOT NULL,
		discarded  INTEGER NOT NULL DEFAULT 0,  -- set by a rollback past it; kept for history
		created_at TEXT NOT NULL,
		PRIMARY KEY (run_id, seq)
	);
	CREATE TABLE events (
		run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
		seq    INTEGER NOT NULL,
		type   TEXT NOT NULL,
		path   TEXT NOT NULL DEFAULT '',
		data   TEXT NOT NULL,
		PRIMARY KEY (run_id, seq)
	);
	CREATE TABLE snapshots (
		run_id     TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
		label      TEXT NOT NULL,
		seq        INTEGER NOT NULL,   -- the checkpoint it holds; 0 is before the first node
		kind       TEXT NOT NULL,      -- snapshot or rollback
		created_at TEXT NOT NULL,
		PRIMARY KEY (run_id, label)
	);`,
	// See shared.go.
	`CREATE TABLE shared_values (
		hash TEXT PRIMARY KEY,  -- sha256 of data, hex
		data TEXT NOT NULL      -- a JSON value
	);
	CREATE TABLE value_refs (
		run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
		hash   TEXT NOT NULL,
		PRIMARY KEY (run_id, hash)
	);`,
	// Every file the pipeline's load read, so that a resume sees a change
	// to a prompt or a called pipeline, not only to the pipeline file.
	`ALTER TABLE runs ADD COLUMN pipeline_files TEXT NOT NULL DEFAULT '{}';`,
	// Batches: a pipeline run over a dataset, one durable run per item.
	`CREATE TABLE batches (
		id            TEXT PRIMARY KEY,
		pipeline      TEXT NOT NULL,  -- path as given
		pipeline_abs  TEXT NOT NULL,
		pipeline_name TEXT NOT NULL,
		pipeline_hash TEXT NOT NULL,
		dataset       TEXT NOT NULL,  -- path as given
		dataset_hash  TEXT NOT NULL,
		flags         TEXT NOT NULL,  -- JSON: the options it ran with
		status        TEXT NOT NULL,
		reason        TEXT NOT NULL DEFAULT '',
		pid           INTEGER NOT NULL DEFAULT 0,
		pid_start     TEXT NOT NULL DEFAULT '',
		started_at    TEXT NOT NULL,
		updated_at    TEXT NOT NULL,
		finished_at   TEXT
	);
	CREATE TABLE batch_items (
		batch_id    TEXT NOT NULL REFERENCES batches(id) ON DELETE CASCADE,
		idx         INTEGER NOT NULL,  -- position in the dataset
		item_key    TEXT NOT NULL,     -- stable name: file name, line, or id field
		item        TEXT NOT NULL,     -- JSON: the dataset row
		run_id      TEXT,              -- the item's run, once started
		status      TEXT NOT NULL,     -- pending, running, completed, failed, stopped, waiting
		scores      TEXT,              -- JSON: metric name -> value
		error       TEXT NOT NULL DEFAULT '',
		class       TEXT NOT NULL DEFAULT '',
		cost_usd    REAL NOT NULL DEFAULT 0,
		tokens      INTEGER NOT NULL DEFAULT 0,
		duration_ms REAL NOT NULL DEFAULT 0,
		updated_at  TEXT NOT NULL,
		PRIMARY KEY (batch_id, idx),
		UNIQUE (batch_id, item_key)
	);
	CREATE INDEX batch_items_run ON batch_items(run_id);`,
	// The response cache: model replies by endpoint and request hash.
	`CREATE TABLE response_cache (
		endpoint   TEXT NOT NULL,     -- base URL, credentials removed
		hash       TEXT NOT NULL,     -- the canonical request's hash
		reply      TEXT NOT NULL,     -- JSON, redacted
		created_at TEXT NOT NULL,
		hits       INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (endpoint, hash)
	);`,
	// A stop another process asked for (see RequestStop); the run's
	// holder polls it.
	`ALTER TABLE runs ADD COLUMN stop_requested TEXT NOT NULL DEFAULT '';`,
	// Inputs a remote caller gave (web, MCP, a cluster job): a resume,
	// by whatever front end, reads no file they name outside the
	// pipeline's directory.
	`ALTER TABLE runs ADD COLUMN remote_inputs INTEGER NOT NULL DEFAULT 0;`,
	// An item run several times (flowrun batch --repeat N) has one row per
	// run, numbered from 0: the key grows a repeat number, so the table is
	// rebuilt (SQLite cannot change a primary key) and every existing item
	// becomes repeat 0.
	`CREATE TABLE batch_items_repeats (
		batch_id    TEXT NOT NULL REFERENCES batches(id) ON DELETE CASCADE,
		idx         INTEGER NOT NULL,
		repeat      INTEGER NOT NULL DEFAULT 0, -- which of the item's runs, from 0
		item_key    TEXT NOT NULL,
		item        TEXT NOT NULL,
		run_id      TEXT,
		status      TEXT NOT NULL,
		scores      TEXT,
		error       TEXT NOT NULL DEFAULT '',
		class       TEXT NOT NULL DEFAULT '',
		cost_usd    REAL NOT NULL DEFAULT 0,
		tokens      INTEGER NOT NULL DEFAULT 0,
		duration_ms REAL NOT NULL DEFAULT 0,
		updated_at  TEXT NOT NULL,
		PRIMARY KEY (batch_id, idx, repeat),
		UNIQUE (batch_id, item_key, repeat)
	);
	INSERT INTO batch_items_repeats (batch_id, idx, item_key, item, run_id, status, scores, error, class, cost_usd, tokens, duration_ms, updated_at)
		SELECT batch_id, idx, item_key, item, run_id, status, scores, error, class, cost_usd, tokens, duration_ms, updated_at FROM batch_items;
	DROP TABLE batch_items;
	ALTER TABLE batch_items_repeats RENAME TO batch_items;
	CREATE INDEX batch_items_run ON batch_items(run_id);`,
	// Why a judge scored an item as it did (its text outputs), and
	// people's pass/fail ratings of items: the metric named human.
	`ALTER TABLE batch_items ADD COLUMN reasoning TEXT NOT NULL DEFAULT '{}';
	CREATE TABLE batch_ratings (
		batch_id  TEXT NOT NULL REFERENCES batches(id),
		item_key  TEXT NOT NULL,
		pass      INTEGER NOT NULL,
		note      TEXT NOT NULL DEFAULT '',
		rated_at  TEXT NOT NULL,
		PRIMARY KEY (batch_id, item_key)
	);`,
	// How a run was started beyond its pipeline and inputs (RunSpec), so
	// that a resume in any process goes on as the run began; and the run a
	// child run serves (a judge's, its item's run).
	`ALTER TABLE runs ADD COLUMN spec TEXT NOT NULL DEFAULT '{}';
	ALTER TABLE runs ADD COLUMN child_of TEXT;
	CREATE INDEX runs_child_of ON runs(child_of);`,
	// Each check of an item's metrics that are lists of checks (a
	// promptfoo test's asserts), by metric.
	`ALTER TABLE batch_items ADD COLUMN checks TEXT NOT NULL DEFAULT '{}';`,
	// What a person calls a batch (flowrun batch --label, --description),
	// so that batches read as the changes they tried, not as timestamps.
	`ALTER TABLE batches ADD COLUMN label TEXT NOT NULL DEFAULT '';
	ALTER TABLE batches ADD COLUMN description TEXT NOT NULL DEFAULT '';`,
}

func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return err
	}
	var v int
	err = tx.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version VALUES (0)`); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if err := knownSchema(v); err != nil {
		return err
	}
	for i := v; i < len(migrations); i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = ?`, len(migrations)); err != nil {
		return err
	}
	return tx.Commit()
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

func parseTime(s sql.NullString) time.Time {
	if !s.Valid {
		return time.Time{}
	}
	t, _ := time.Parse(time.RFC3339Nano, s.String)
	return t
}
