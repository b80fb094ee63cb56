// Package jsjournal is the journal of runs kept in NATS JetStream: run
// records and stop requests in a key-value bucket, checkpoints and events
// as messages of one stream, on each run's own subjects.
package jsjournal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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

// Journal keeps runs in one JetStream account.
type Journal struct {
	js   jetstream.JetStream
	runs jetstream.KeyValue
	msgs jetstream.Stream

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
	msgs, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: stream, Subjects: []string{cpSub + "*", evSub + "*"}, AllowDirect: true,
	})
	if err != nil {
		return nil, fmt.Errorf("journal: stream %s: %w", stream, err)
	}
	return &Journal{js: js, runs: runs, msgs: msgs, last: map[string]int64{}}, nil
}

// record is a run's entry in the bucket.
type record struct {
	journal.Run
	Stop string `json:"stop,omitempty"`
}

func (j *Journal) Create(ctx context.Context, r journal.Run) error {
	r.Status = runtime.StatusRunning
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
	r.Status, r.Stop = runtime.StatusRunning, ""
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

// lastSeq reads the number of a run's last stored checkpoint.
func (j *Journal) lastSeq(ctx context.Context, id string) (int64, error) {
	msg, err := j.msgs.GetLastMsgForSubject(ctx, cpSub+id)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("run %s: reading its last checkpoint: %w", id, err)
	}
	var cp runtime.Checkpoint
	if err := json.Unmarshal(msg.Data, &cp); err != nil {
		return 0, fmt.Errorf("run %s: its last checkpoint is not JSON: %w", id, err)
	}
	return cp.Seq, nil
}

func (j *Journal) Finish(ctx context.Context, id string, status runtime.Status) error {
	r, rev, err := j.get(ctx, id)
	if err != nil {
		return err
	}
	r.Status, r.Stop = status, ""
	if err := j.update(ctx, r, rev); err != nil {
		return err
	}
	j.mu.Lock()
	delete(j.last, id)
	j.mu.Unlock()
	return nil
}

// Save publishes with the run and number as the message id, so that a
// publish retried after a lost acknowledgement is stored once.
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
	data, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("run %s: checkpoint %s: %w", id, cp.Path, err)
	}
	msgID := id + "." + strconv.FormatInt(cp.Seq, 10)
	if _, err := j.js.Publish(ctx, cpSub+id, data, jetstream.WithMsgID(msgID)); err != nil {
		j.last[id] = -1
		return fmt.Errorf("run %s: storing checkpoint %d in JetStream: %w", id, cp.Seq, err)
	}
	j.last[id] = cp.Seq
	return nil
}

func (j *Journal) Checkpoints(ctx context.Context, id string, upTo int64) ([]*runtime.Checkpoint, error) {
	var out []*runtime.Checkpoint
	err := j.each(ctx, cpSub+id, func(data []byte) error {
		var cp runtime.Checkpoint
		if err := json.Unmarshal(data, &cp); err != nil {
			return fmt.Errorf("run %s: a checkpoint in JetStream is not JSON: %w", id, err)
		}
		if upTo <= 0 || cp.Seq <= upTo {
			out = append(out, &cp)
		}
		return nil
	})
	return out, err
}

func (j *Journal) Event(ctx context.Context, id string, e runtime.Event) error {
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("run %s: event %s: %w", id, e.Type, err)
	}
	if _, err := j.js.Publish(ctx, evSub+id, data); err != nil {
		return fmt.Errorf("run %s: storing event %s in JetStream: %w", id, e.Type, err)
	}
	return nil
}

func (j *Journal) Events(ctx context.Context, id string) ([]runtime.Event, error) {
	var out []runtime.Event
	err := j.each(ctx, evSub+id, func(data []byte) error {
		var e runtime.Event
		if err := json.Unmarshal(data, &e); err != nil {
			return fmt.Errorf("run %s: an event in JetStream is not JSON: %w", id, err)
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

// each calls f on the data of every message of subject, oldest first.
func (j *Journal) each(ctx context.Context, subject string, f func([]byte) error) error {
	var seq uint64 = 1
	for {
		msg, err := j.msgs.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s from JetStream: %w", subject, err)
		}
		if err := f(msg.Data); err != nil {
			return err
		}
		seq = msg.Sequence + 1
	}
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
