package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/flowrun/flowrun/redact"
	"github.com/flowrun/flowrun/runtime"
)

// checkpoints stores a run's checkpoints in JetStream, one message each
// on the run's own subject, with run and sequence as the message id so
// that a retried publish is stored once. Every Save waits for JetStream's
// acknowledgement: with replicas, that is a quorum's copy on disk.
type checkpoints struct {
	c   *conn
	run string
}

func (s *checkpoints) Save(ctx context.Context, cp *runtime.Checkpoint) error {
	data, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", cp.Path, err)
	}
	data = redact.JSON(data)
	id := s.run + "." + strconv.FormatInt(cp.Seq, 10)
	return retry(ctx, "storing checkpoint "+id+" in JetStream", func(ctx context.Context) error {
		_, err := s.c.js.Publish(ctx, cpSubject+s.run, data, jetstream.WithMsgID(id))
		return err
	})
}

// loadCheckpoints reads back every checkpoint a run stored, in order.
func (c *conn) loadCheckpoints(ctx context.Context, run string) ([]*runtime.Checkpoint, error) {
	var out []*runtime.Checkpoint
	err := c.eachMsg(ctx, cpSubject+run, func(_ uint64, data []byte) error {
		var cp runtime.Checkpoint
		if err := json.Unmarshal(data, &cp); err != nil {
			return fmt.Errorf("run %s: a checkpoint in JetStream is not JSON: %w", run, err)
		}
		out = append(out, &cp)
		return nil
	})
	return out, err
}

// loadEvents reads back every event a run's attempts published, in
// order, and the stream sequence of the last.
func (c *conn) loadEvents(ctx context.Context, run string) (evs []runtime.Event, last uint64, err error) {
	err = c.eachMsg(ctx, evSubject+run, func(seq uint64, data []byte) error {
		var e runtime.Event
		if err := json.Unmarshal(data, &e); err != nil {
			return fmt.Errorf("run %s: an event in JetStream is not JSON: %w", run, err)
		}
		evs, last = append(evs, e), seq
		return nil
	})
	return evs, last, err
}

// eachMsg calls f on every message of subject in the runs stream, oldest
// first, one direct get per message.
func (c *conn) eachMsg(ctx context.Context, subject string, f func(seq uint64, data []byte) error) error {
	var seq uint64 = 1
	for {
		var msg *jetstream.RawStreamMsg
		err := retry(ctx, "reading "+subject+" from JetStream", func(ctx context.Context) error {
			var err error
			msg, err = c.runs.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
		if msg == nil {
			return nil
		}
		if err := f(msg.Sequence, msg.Data); err != nil {
			return err
		}
		seq = msg.Sequence + 1
	}
}

// events publishes a run's events without waiting for each; wait
// returns once JetStream has acknowledged them all. Events are the run's
// timeline, not what a resume restores: like the SQLite recorder's, the
// last few may be lost when a worker is killed.
type events struct {
	c   *conn
	run string

	mu   sync.Mutex
	acks []jetstream.PubAckFuture
}

func (s *events) Event(e runtime.Event) {
	data, err := json.Marshal(e)
	if err != nil {
		return
	}
	f, err := s.c.js.PublishAsync(evSubject+s.run, redact.JSON(data))
	if err != nil {
		return
	}
	s.mu.Lock()
	s.acks = append(s.acks, f)
	s.mu.Unlock()
}

// wait waits for the acknowledgements of the events published so far.
func (s *events) wait(ctx context.Context) {
	s.mu.Lock()
	acks := s.acks
	s.acks = nil
	s.mu.Unlock()
	for _, f := range acks {
		select {
		case <-f.Ok():
		case <-f.Err():
		case <-ctx.Done():
			return
		}
	}
}
