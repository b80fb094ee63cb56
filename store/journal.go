package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// A checkpoint journal is how a recorder makes a checkpoint durable at the
// cost of one write(2): the checkpoints of a run, appended to a file of
// its own beside the database, then moved into the database in groups
// (see Recorder). Like a commit with synchronous=NORMAL, a write survives
// the process being killed, not a power loss. Each journal file is written
// by one recorder; a recorder starts a new one at every commit to the
// database and deletes the old one once its checkpoints are committed.
//
// A journal left by a process that died holds checkpoints that may not be
// in the database yet. Before anything reads a run's checkpoints to act on
// them (Claim, Checkpoints, Point, Snapshot, Rollback, Fork), settle moves
// them in.
//
// Format: the 8 bytes "FRJRNL01", then records of
//
//	length uint32 | crc32 (IEEE) of the payload uint32 | payload
//	payload: seq uint64 | len(path) uint32 | path | len(created) uint32 | created | data
//
// little-endian. Reading stops at the first short or damaged record: the
// write that a kill cut short, whose checkpoint was never acknowledged.

const journalMagic = "FRJRNL01"

// journalDir holds the journals of the store at path.
func journalDir(dbPath string) string { return dbPath + ".journal" }

// liveJournals are the journal files this process has open.
var liveJournals sync.Map // path -> struct{}

type journalFile struct {
	path string
	f    *os.File
	buf  []byte
}

// openJournal starts a journal file for a run. Its name says which process
// writes it: RUN.PID.START.RANDOM.log.
func (s *Store) openJournal(runID string) (*journalFile, error) {
	dir := journalDir(s.path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint journal: %w", err)
	}
	pid := os.Getpid()
	start := processStart(pid)
	if start == "" {
		start = "0"
	}
	name := fmt.Sprintf("%s.%d.%s.%08x.log", url.PathEscape(runID), pid, start, rand.Uint32())
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("checkpoint journal: %w", err)
	}
	if _, err := f.Write([]byte(journalMagic)); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("checkpoint journal: %w", err)
	}
	liveJournals.Store(path, struct{}{})
	return &journalFile{path: path, f: f}, nil
}

// append writes checkpoints with one write.
func (j *journalFile) append(cps []pendingCheckpoint) error {
	b := j.buf[:0]
	for _, cp := range cps {
		n := 8 + 4 + len(cp.path) + 4 + len(cp.created) + len(cp.data)
		b = binary.LittleEndian.AppendUint32(b, uint32(n))
		b = binary.LittleEndian.AppendUint32(b, 0) // the CRC, below
		at := len(b)
		b = binary.LittleEndian.AppendUint64(b, uint64(cp.seq))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(cp.path)))
		b = append(b, cp.path...)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(cp.created)))
		b = append(b, cp.created...)
		b = append(b, cp.data...)
		binary.LittleEndian.PutUint32(b[at-4:], crc32.ChecksumIEEE(b[at:]))
	}
	j.buf = b[:0]
	if _, err := j.f.Write(b); err != nil {
		return fmt.Errorf("checkpoint journal %s: %w", j.path, err)
	}
	return nil
}

// close closes the file once it is complete. It stays this process's
// (settle leaves it alone) until remove or abandon.
func (j *journalFile) close() error {
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}

// remove closes and deletes the file, once its checkpoints are in the
// database.
func (j *journalFile) remove() error {
	err := j.close()
	if rerr := os.Remove(j.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	liveJournals.Delete(j.path)
	return err
}

// abandon closes the file and leaves it, with checkpoints the database
// may lack, for settle to move in.
func (j *journalFile) abandon() error {
	err := j.close()
	liveJournals.Delete(j.path)
	return err
}

// readJournal returns the checkpoints of a journal file, up to the first
// damaged record.
func readJournal(path string) ([]pendingCheckpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(string(b), journalMagic) {
		return nil, nil // cut short before its header: empty
	}
	b = b[len(journalMagic):]
	var out []pendingCheckpoint
	for len(b) >= 8 {
		n := int(binary.LittleEndian.Uint32(b))
		sum := binary.LittleEndian.Uint32(b[4:])
		if n < 16 || len(b) < 8+n || crc32.ChecksumIEEE(b[8:8+n]) != sum {
			break
		}
		p := b[8 : 8+n]
		b = b[8+n:]
		var cp pendingCheckpoint
		cp.seq = int64(binary.LittleEndian.Uint64(p))
		p = p[8:]
		l := int(binary.LittleEndian.Uint32(p))
		if len(p) < 4+l+4 {
			break
		}
		cp.path, p = string(p[4:4+l]), p[4+l:]
		l = int(binary.LittleEndian.Uint32(p))
		if len(p) < 4+l {
			break
		}
		cp.created, cp.data = string(p[4:4+l]), string(p[4+l:])
		out = append(out, cp)
	}
	return out, nil
}

// journalName parses RUN.PID.START.RANDOM.log, RUN path-escaped.
func journalName(name string) (runID string, pid int, start string, ok bool) {
	parts := strings.Split(name, ".")
	n := len(parts)
	if n < 5 || parts[n-1] != "log" {
		return "", 0, "", false
	}
	pid, err := strconv.Atoi(parts[n-4])
	if err != nil {
		return "", 0, "", false
	}
	runID, err = url.PathUnescape(strings.Join(parts[:n-4], "."))
	if err != nil {
		return "", 0, "", false
	}
	start = parts[n-3]
	if start == "0" {
		start = ""
	}
	return runID, pid, start, true
}

// gone says whether the writer of the journal at path has stopped: the
// file is not one this process has open, and the process that wrote it
// is not alive.
func gone(path string, pid int, start string) bool {
	if _, live := liveJournals.Load(path); live {
		return false
	}
	return pid == os.Getpid() || !alive(pid, start)
}

// settle moves into the database the checkpoints that journals of runID
// left by processes that are gone hold, and deletes those journals. The
// journals of a live writer are left alone: it moves them in itself.
func (s *Store) settle(ctx context.Context, runID string) error {
	if s.readOnly {
		return nil
	}
	dir := journalDir(s.path)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checkpoint journals: %w", err)
	}
	for _, e := range entries {
		id, pid, start, ok := journalName(e.Name())
		path := filepath.Join(dir, e.Name())
		if !ok || id != runID || !gone(path, pid, start) {
			continue
		}
		if err := s.importJournal(ctx, runID, path); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) importJournal(ctx context.Context, runID, path string) error {
	cps, err := readJournal(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // another process moved it in
	}
	if err != nil {
		return fmt.Errorf("checkpoint journal %s: %w", path, err)
	}
	if len(cps) > 0 {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		var exists int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM runs WHERE id = ?`, runID).Scan(&exists); err != nil {
			return err
		}
		if exists > 0 {
			// The journal may repeat checkpoints already committed (or
			// since discarded by a rollback): those stay as they are.
			for _, cp := range cps {
				if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO checkpoints (run_id, seq, path, data, created_at) VALUES (?, ?, ?, ?, ?)`,
					runID, cp.seq, cp.path, cp.data, cp.created); err != nil {
					return fmt.Errorf("checkpoint journal %s: %w", path, err)
				}
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checkpoint journal: %w", err)
	}
	return nil
}

// dropJournals deletes the journals of runs that no longer exist.
func (s *Store) dropJournals(ctx context.Context) error {
	dir := journalDir(s.path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, e := range entries {
		runID, pid, start, ok := journalName(e.Name())
		path := filepath.Join(dir, e.Name())
		if !ok || !gone(path, pid, start) {
			continue
		}
		var exists int
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM runs WHERE id = ?`, runID).Scan(&exists); err != nil {
			return err
		}
		if exists == 0 {
			_ = os.Remove(path)
		}
	}
	return nil
}
