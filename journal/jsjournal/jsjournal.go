// Package jsjournal is the journal of runs kept in NATS JetStream: run
// records and stop requests in a key-value bucket, checkpoints and events
// as messages of one stream, on each run's own subjects.
package jsjournal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flowrun/flowrun/journal"
	"github.com/flowrun/flowrun/runtime"
)

const (
	stream = "JOURNAL"
	bucket = "JOURNAL_RUNS"
	cpSub  = "journal.cp."
	evSub  = "journal.ev."
)

// Journal keeps runs in one JetStream account: records and stop requests
// in a key-value bucket, checkpoints and events in its Log.
type Journal struct {
	*Log
	runs jetstream.KeyValue

	mu sync.Mutex
	// last is a held run's last checkpoint number, -1 after a failed
	// Save: a publish whose acknowledgement was lost may still be stored.
	last map[string]int64
}

var _ journal.Journal = (*Journal)(nil)

// Open makes the journal's stream and bucket on nc's JetStream if they are
// missing.
func Open(ctx context.Context, nc *nats.Conn) (*Journal, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("journal: JetStream: %w", err)
	}
	runs, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket})
	if err != nil {
		return nil, fmt.Errorf("journal: bucket %s: %w", bucket, err)
	}
	log, err := OpenLog(ctx, js, Config{})
	if err != nil {
		return nil, err
	}
	return &Journal{Log: log, runs: runs, last: map[string]int64{}}, nil
}

// record is a run's entry in the bucket.
type record struct {
	journal.Run
	Stop string `json:"stop,omitempty"`
}

func (j *Journal) Create(ctx context.Context, r journal.Run) error {
	r.Ending = journal.Ending{Status: runtime.StatusRunning}
	data, err := json.Marshal(record{Run: r})
	if err != nil {
		return fmt.Errorf("run %s: %w", r.ID, err)
	}
	if _, err := j.runs.Create(ctx, r.ID, data); err != nil {
		return fmt.Errorf("run %s: recording it in bucket %s: %w", r.ID, bucket, err)
	}
	j.hold(r.ID, 0)
	return nil
}

// Fork copies the parent's checkpoints before it records the child: a
// fork cut off between the two leaves a run no one knows, never a child
// missing part of what it goes on from.
func (j *Journal) Fork(ctx context.Context, parent string, upTo int64, child journal.Run) error {
	p, _, err := j.get(ctx, parent)
	if err != nil {
		return err
	}
	var cps []*runtime.Checkpoint
	if upTo > 0 {
		if cps, err = j.Log.Checkpoints(ctx, parent, upTo); err != nil {
			return err
		}
	}
	for _, cp := range cps {
		if err := j.Log.Save(ctx, child.ID, cp); err != nil {
			return fmt.Errorf("run %s: copying checkpoint %d of run %s: %w", child.ID, cp.Seq, parent, err)
		}
	}
	child.ParentRun, child.ParentSeq = parent, upTo
	if child.Inputs == nil {
		child.Inputs = p.Inputs
	}
	if err := j.Create(ctx, child); err != nil {
		return err
	}
	if len(cps) > 0 {
		j.hold(child.ID, cps[len(cps)-1].Seq)
	}
	return nil
}

func (j *Journal) SetSpec(ctx context.Context, id string, spec journal.Spec) error {
	r, rev, err := j.get(ctx, id)
	if err != nil {
		return err
	}
	r.Spec = spec
	return j.update(ctx, r, rev)
}

func (j *Journal) get(ctx context.Context, id string) (record, uint64, error) {
	e, err := j.runs.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return record{}, 0, fmt.Errorf("run %s: %w", id, journal.ErrNotFound)
	}
	if err != nil {
		return record{}, 0, fmt.Errorf("run %s: reading it from bucket %s: %w", id, bucket, err)
	}
	var r record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return record{}, 0, fmt.Errorf("run %s: its record in bucket %s is not JSON: %w", id, bucket, err)
	}
	return r, e.Revision(), nil
}

// update changes a run's record only if no one else changed it since
// rev: that comparison is what lets exactly one of two resumers win.
func (j *Journal) update(ctx context.Context, r record, rev uint64) error {
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("run %s: %w", r.ID, err)
	}
	_, err = j.runs.Update(ctx, r.ID, data, rev)
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		return fmt.Errorf("run %s changed while it was being updated: %w", r.ID, journal.ErrClaimed)
	}
	if err != nil {
		return fmt.Errorf("run %s: updating it in bucket %s: %w", r.ID, bucket, err)
	}
	return nil
}

func (j *Journal) Run(ctx context.Context, id string) (journal.Run, error) {
	r, _, err := j.get(ctx, id)
	return r.Run, err
}

// Claim refuses a run recorded as running even if its holder died: no
// lease tells a dead holder from a live one yet (the cluster's
// coordinator has its own, which this journal does not replace).
func (j *Journal) Claim(ctx context.Context, id string) error {
	r, rev, err := j.get(ctx, id)
	if err != nil {
		return err
	}
	if r.Status == runtime.StatusRunning {
		return fmt.Errorf("run %s: %w", id, journal.ErrClaimed)
	}
	r.Ending, r.Stop = journal.Ending{Status: runtime.StatusRunning}, ""
	if err := j.update(ctx, r, rev); err != nil {
		return err
	}
	last, err := j.lastSeq(ctx, id)
	if err != nil {
		return err
	}
	j.hold(id, last)
	return nil
}

func (j *Journal) hold(id string, last int64) {
	j.mu.Lock()
	j.last[id] = last
	j.mu.Unlock()
}

func (j *Journal) Finish(ctx context.Context, id string, end journal.Ending) error {
	r, rev, err := j.get(ctx, id)
	if err != nil {
		return err
	}
	r.Ending, r.Stop = end, ""
	if err := j.update(ctx, r, rev); err != nil {
		return err
	}
	j.mu.Lock()
	delete(j.last, id)
	j.mu.Unlock()
	return nil
}

// Save numbers cp after the run's last checkpoint and stores it (Log.Save).
func (j *Journal) Save(ctx context.Context, id string, cp *runtime.Checkpoint) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	last, ok := j.last[id]
	if !ok {
		return fmt.Errorf("run %s is not held by this journal: create or claim it first", id)
	}
	if last < 0 {
		var err error
		if last, err = j.lastSeq(ctx, id); err != nil {
			return err
		}
	}
	cp.Seq = last + 1
	if err := j.Log.Save(ctx, id, cp); err != nil {
		j.last[id] = -1
		return fmt.Errorf("run %s: %w", id, err)
	}
	j.last[id] = cp.Seq
	return nil
}

func (j *Journal) RequestStop(ctx context.Context, id, reason string) error {
	r, rev, err := j.get(ctx, id)
	if err != nil {
		return err
	}
	if r.Status != runtime.StatusRunning {
		return fmt.Errorf("run %s is %s, not running: there is nothing to stop", id, r.Status)
	}
	r.Stop = reason
	return j.update(ctx, r, rev)
}

func (j *Journal) StopRequested(ctx context.Context, id string) (string, error) {
	r, _, err := j.get(ctx, id)
	return r.Stop, err
}
