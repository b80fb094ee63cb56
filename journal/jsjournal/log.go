package jsjournal

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

	"github.com/flowrun/flowrun/journal"
	"github.com/flowrun/flowrun/runtime"
)

// Config places a log in a JetStream account that someone else laid out
// (a flowrun cluster's runs stream, whose subjects its credentials are
// limited to), and says how what it stores is sealed and checked. The
// zero Config is the journal's own stream, unsigned.
type Config struct {
	// Stream is the stream's name; Checkpoints and Events prefix each
	// run's subjects on it (the run id follows).
	Stream              string
	Checkpoints, Events string
	// Seal makes the message that stores data on subject under msgID (a
	// cluster signs it); by default, the data with the id.
	Seal func(subject, msgID string, data []byte) *nats.Msg
	// Check accepts a stored message, or says why not: a refused message
	// is left out of what is read back and told to Refused.
	Check   func(subject string, h nats.Header, data []byte) error
	Refused func(what, line string)
	// Scrub runs over every checkpoint and event before it is sealed (a
	// cluster worker's endpoints are kept out of what it publishes).
	Scrub func([]byte) []byte
	// Retry calls f until it succeeds, fails for good or ctx ends (a
	// server restarting answers with time-outs for a while); by default,
	// once. Every publish is idempotent: its message id dedups it.
	Retry func(ctx context.Context, what string, f func(context.Context) error) error
}

func (c Config) withDefaults() Config {
	if c.Stream == "" {
		c.Stream, c.Checkpoints, c.Events = stream, cpSub, evSub
	}
	if c.Seal == nil {
		c.Seal = func(subject, msgID string, data []byte) *nats.Msg {
			m := nats.NewMsg(subject)
			m.Data = data
			m.Header.Set(nats.MsgIdHdr, msgID)
			return m
		}
	}
	if c.Check == nil {
		c.Check = func(string, nats.Header, []byte) error { return nil }
	}
	if c.Refused == nil {
		c.Refused = func(string, string) {}
	}
	if c.Scrub == nil {
		c.Scrub = func(b []byte) []byte { return b }
	}
	if c.Retry == nil {
		c.Retry = func(ctx context.Context, what string, f func(context.Context) error) error {
			if err := f(ctx); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			return nil
		}
	}
	return c
}

// Log is the part of a journal that a run writes as it goes, kept in one
// stream: checkpoints, numbered by the run, and events. A run kept in a
// Log alone has its record elsewhere (a cluster's items: in the
// coordinator's store).
type Log struct {
	cfg  Config
	js   jetstream.JetStream
	msgs jetstream.Stream

	mu sync.Mutex
	// acks are the events published and not yet acknowledged, by run.
	acks map[string][]jetstream.PubAckFuture
}

var _ journal.Log = (*Log)(nil)

// OpenLog makes the log's stream on js if it is missing.
func OpenLog(ctx context.Context, js jetstream.JetStream, cfg Config) (*Log, error) {
	cfg = cfg.withDefaults()
	var msgs jetstream.Stream
	err := cfg.Retry(ctx, "opening stream "+cfg.Stream, func(ctx context.Context) error {
		var err error
		msgs, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name: cfg.Stream, Subjects: []string{cfg.Checkpoints + "*", cfg.Events + "*"}, AllowDirect: true,
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	return NewLog(js, msgs, cfg), nil
}

// NewLog is the log on a stream already bound: one made by whoever laid
// the account out, which a credential that may only write to it (a
// cluster worker's) could not create.
func NewLog(js jetstream.JetStream, msgs jetstream.Stream, cfg Config) *Log {
	return &Log{cfg: cfg.withDefaults(), js: js, msgs: msgs, acks: map[string][]jetstream.PubAckFuture{}}
}

// Save stores cp under the number the run gave it, with the run and
// number as the message id: a publish retried after a lost
// acknowledgement, or a second attempt's copy, is stored once. It waits
// for JetStream's acknowledgement (with replicas, a quorum's copy).
func (l *Log) Save(ctx context.Context, id string, cp *runtime.Checkpoint) error {
	data, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("run %s: checkpoint %s: %w", id, cp.Path, err)
	}
	msgID := id + "." + strconv.FormatInt(cp.Seq, 10)
	msg := l.cfg.Seal(l.cfg.Checkpoints+id, msgID, l.cfg.Scrub(data))
	return l.cfg.Retry(ctx, "storing checkpoint "+msgID+" in JetStream", func(ctx context.Context) error {
		_, err := l.js.PublishMsg(ctx, msg)
		return err
	})
}

// Checkpoints reads back the run's checkpoints in order, those numbered
// up to upTo when it is above 0. One Check refuses is left out, and so
// is a copy of an earlier number: a run restores only what its holders
// stored.
func (l *Log) Checkpoints(ctx context.Context, id string, upTo int64) ([]*runtime.Checkpoint, error) {
	var out []*runtime.Checkpoint
	var last int64 = -1
	err := l.each(ctx, l.cfg.Checkpoints+id, func(msg *jetstream.RawStreamMsg) error {
		if err := l.cfg.Check(msg.Subject, msg.Header, msg.Data); err != nil {
			l.cfg.Refused("checkpoints", fmt.Sprintf("refused a checkpoint of run %s (stream sequence %d): %v", id, msg.Sequence, err))
			return nil
		}
		var cp runtime.Checkpoint
		if err := json.Unmarshal(msg.Data, &cp); err != nil {
			return fmt.Errorf("run %s: a checkpoint in JetStream is not JSON: %w", id, err)
		}
		if cp.Seq <= last || (upTo > 0 && cp.Seq > upTo) {
			return nil
		}
		last = cp.Seq
		out = append(out, &cp)
		return nil
	})
	return out, err
}

// Event publishes e without waiting for its acknowledgement; Flush waits
// for them. Events are the run's timeline, not what a resume restores:
// the last few may be lost with a killed process.
func (l *Log) Event(_ context.Context, id string, e runtime.Event) error {
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("run %s: event %s: %w", id, e.Type, err)
	}
	f, err := l.js.PublishMsgAsync(l.cfg.Seal(l.cfg.Events+id, nuid.Next(), l.cfg.Scrub(data)))
	if err != nil {
		return fmt.Errorf("run %s: publishing event %s to JetStream: %w", id, e.Type, err)
	}
	l.mu.Lock()
	l.acks[id] = append(l.acks[id], f)
	l.mu.Unlock()
	return nil
}

// EventAckTimeout is how long an event waits for JetStream to
// acknowledge it before Flush publishes it again (its message id makes a
// second copy a duplicate JetStream drops). Without it, an event whose
// acknowledgement was lost with a server (a stream leader shut down
// mid-publish) is waited for forever, and its run with it.
var EventAckTimeout = 5 * time.Second

// Flush waits for the acknowledgements of the run's events published so
// far, publishing again those that got none, all within one budget: when
// a server lost many acknowledgements, a budget each would add up. What
// is still not stored then is given up, as a killed process's would be.
func (l *Log) Flush(ctx context.Context, id string) error {
	l.mu.Lock()
	acks := l.acks[id]
	delete(l.acks, id)
	l.mu.Unlock()
	var again context.Context
	for _, f := range acks {
		select {
		case <-f.Ok():
		case <-f.Err():
			if again == nil {
				var cancel context.CancelFunc
				again, cancel = context.WithTimeout(ctx, 4*EventAckTimeout)
				defer cancel()
			}
			if again.Err() != nil {
				continue
			}
			_ = l.cfg.Retry(again, "publishing an event to JetStream", func(ctx context.Context) error {
				_, err := l.js.PublishMsg(ctx, f.Msg())
				return err
			})
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Events reads back the run's events in order, once this process's are
// stored.
func (l *Log) Events(ctx context.Context, id string) ([]runtime.Event, error) {
	evs, _, err := l.EventsSeq(ctx, id)
	return evs, err
}

// EventsSeq is Events, with the stream sequence of the run's last event
// message: a follower of the stream goes on after it.
func (l *Log) EventsSeq(ctx context.Context, id string) (evs []runtime.Event, last uint64, err error) {
	if err := l.Flush(ctx, id); err != nil {
		return nil, 0, err
	}
	seen := map[string]bool{}
	err = l.each(ctx, l.cfg.Events+id, func(msg *jetstream.RawStreamMsg) error {
		last = msg.Sequence
		if e, ok := l.DecodeEvent(msg.Subject, msg.Sequence, msg.Header, msg.Data, seen); ok {
			evs = append(evs, e)
		}
		return nil
	})
	return evs, last, err
}

// DecodeEvent decodes an event message, read back or delivered live, if
// Check accepts it and seen does not hold its message id yet (it then
// does): a copy of an event is not the run's twice.
func (l *Log) DecodeEvent(subject string, seq uint64, h nats.Header, data []byte, seen map[string]bool) (runtime.Event, bool) {
	var e runtime.Event
	run := strings.TrimPrefix(subject, l.cfg.Events)
	if err := l.cfg.Check(subject, h, data); err != nil {
		l.cfg.Refused("events", fmt.Sprintf("refused an event of run %s (stream sequence %d): %v", run, seq, err))
		return e, false
	}
	if id := h.Get(nats.MsgIdHdr); id != "" {
		if seen[id] {
			return e, false
		}
		seen[id] = true
	}
	if err := json.Unmarshal(data, &e); err != nil {
		l.cfg.Refused("events", fmt.Sprintf("refused an event of run %s (stream sequence %d): not JSON", run, seq))
		return e, false
	}
	return e, true
}

// each calls f on every message of subject, oldest first, one direct get
// per message.
func (l *Log) each(ctx context.Context, subject string, f func(msg *jetstream.RawStreamMsg) error) error {
	var seq uint64 = 1
	for {
		var msg *jetstream.RawStreamMsg
		err := l.cfg.Retry(ctx, "reading "+subject+" from JetStream", func(ctx context.Context) error {
			var err error
			msg, err = l.msgs.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				msg = nil
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

// lastSeq reads the number of a run's last stored checkpoint.
func (l *Log) lastSeq(ctx context.Context, id string) (int64, error) {
	msg, err := l.msgs.GetLastMsgForSubject(ctx, l.cfg.Checkpoints+id)
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
