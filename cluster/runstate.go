package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

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
	data = s.c.hide.scrub(redact.JSON(data))
	id := s.run + "." + strconv.FormatInt(cp.Seq, 10)
	msg := signMsg(s.c.signer, cpSubject+s.run, id, data)
	return retry(ctx, "storing checkpoint "+id+" in JetStream", func(ctx context.Context) error {
		_, err := s.c.js.PublishMsg(ctx, msg)
		return err
	})
}

// loadCheckpoints reads back every checkpoint a run stored by a trusted
// worker, in order. One not signed by a trusted worker is refused, and so
// is a copy of an earlier one: a run restores only what its workers
// stored.
func (c *conn) loadCheckpoints(ctx context.Context, run string) ([]*runtime.Checkpoint, error) {
	var out []*runtime.Checkpoint
	var last int64 = -1
	err := c.eachMsg(ctx, cpSubject+run, func(msg *jetstream.RawStreamMsg) error {
		if _, err := c.workers.msg(msg.Subject, msg.Header, msg.Data); err != nil {
			c.refused.report("checkpoints", fmt.Sprintf("refused a checkpoint of run %s (stream sequence %d): %v", run, msg.Sequence, err))
			return nil
		}
		var cp runtime.Checkpoint
		if err := json.Unmarshal(msg.Data, &cp); err != nil {
			return fmt.Errorf("run %s: a checkpoint in JetStream is not JSON: %w", run, err)
		}
		if cp.Seq <= last {
			return nil
		}
		last = cp.Seq
		out = append(out, &cp)
		return nil
	})
	return out, err
}

// loadEvents reads back every event a run's attempts published, in
// order, and the stream sequence of the last; events not signed by a
// trusted worker, and copies of one, are left out.
func (c *conn) loadEvents(ctx context.Context, run string) (evs []runtime.Event, last uint64, err error) {
	seen := map[string]bool{}
	err = c.eachMsg(ctx, evSubject+run, func(msg *jetstream.RawStreamMsg) error {
		e, ok := c.event(msg.Subject, msg.Sequence, msg.Header, msg.Data, seen)
		if ok {
			evs = append(evs, e)
		}
		last = msg.Sequence
		return nil
	})
	return evs, last, err
}

// event decodes an event message if a trusted worker signed it and seen
// does not hold its id yet.
func (c *conn) event(subject string, seq uint64, h nats.Header, data []byte, seen map[string]bool) (runtime.Event, bool) {
	var e runtime.Event
	run := strings.TrimPrefix(subject, evSubject)
	if _, err := c.workers.msg(subject, h, data); err != nil {
		c.refused.report("events", fmt.Sprintf("refused an event of run %s (stream sequence %d): %v", run, seq, err))
		return e, false
	}
	id := h.Get(nats.MsgIdHdr)
	if seen[id] {
		return e, false
	}
	seen[id] = true
	if err := json.Unmarshal(data, &e); err != nil {
		c.refused.report("events", fmt.Sprintf("refused an event of run %s (stream sequence %d): not JSON", run, seq))
		return e, false
	}
	return e, true
}

// eachMsg calls f on every message of subject in the runs stream, oldest
// first, one direct get per message.
func (c *conn) eachMsg(ctx context.Context, subject string, f func(msg *jetstream.RawStreamMsg) error) error {
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
		if err := f(msg); err != nil {
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
	f, err := s.c.js.PublishMsgAsync(signMsg(s.c.signer, evSubject+s.run, nuid.Next(), s.c.hide.scrub(redact.JSON(data))))
	if err != nil {
		return
	}
	s.mu.Lock()
	s.acks = append(s.acks, f)
	s.mu.Unlock()
}

// eventAckTimeout is how long an event's publication waits for JetStream
// to acknowledge it before it is published again (the message id makes a
// second copy a duplicate JetStream drops). Without it, an event whose
// acknowledgement was lost with a server (a stream leader shut down
// mid-publish) is waited for forever, and its item with it.
var eventAckTimeout = 5 * time.Second

// wait waits for the acknowledgements of the events published so far,
// publishing again those that got none, all within one budget: when
// a server lost many acknowledgements, a budget each would add up.
func (s *events) wait(ctx context.Context) {
	s.mu.Lock()
	acks := s.acks
	s.acks = nil
	s.mu.Unlock()
	var again context.Context
	for _, f := range acks {
		select {
		case <-f.Ok():
		case <-f.Err():
			if again == nil {
				var cancel context.CancelFunc
				again, cancel = context.WithTimeout(ctx, 4*eventAckTimeout)
				defer cancel()
			}
			if again.Err() != nil {
				continue
			}
			_ = retry(again, "publishing an event to JetStream", func(ctx context.Context) error {
				_, err := s.c.js.PublishMsg(ctx, f.Msg())
				return err
			})
		case <-ctx.Done():
			return
		}
	}
}
