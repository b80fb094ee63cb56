package web

import (
	"bytes"
	"context"
	"encoding/json"
	"sort"
	"sync"
	"time"

	"github.com/flowrun/flowrun/eventview"
	"github.com/flowrun/flowrun/runtime"
)

// liveMsg is one event of a run as its live streams send it: its
// timeline row and node state, rendered once, as JSON.
type liveMsg struct {
	seq  int64
	data []byte
}

// runFeed reads one run's events from the store once for every live
// stream of that run and keeps them rendered (each row a few hundred
// bytes, as the run's page holds them), so that a stream costs the rows
// it sends, not a reading of the run (its inputs may be large) or a
// decoding of each event per client. It holds every event from the
// first, so that a stream may start after any of them.
type runFeed struct {
	s  *Server
	id string

	mu      sync.Mutex
	started time.Time
	msgs    []liveMsg // in seq order; appended to, never changed
	status  runtime.Status
	err     error         // reading the store failed: the streams end
	changed chan struct{} // closed, and replaced, when msgs, status or err change
	streams int
	stop    context.CancelFunc
}

// follow returns the feed of run id with one more stream on it, starting
// one if the run has none; unfollow lets it go.
func (s *Server) follow(id string) *runFeed {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.feeds[id]; f != nil {
		f.mu.Lock()
		f.streams++
		f.mu.Unlock()
		return f
	}
	ctx, stop := context.WithCancel(s.ctx)
	f := &runFeed{s: s, id: id, changed: make(chan struct{}), streams: 1, stop: stop}
	s.feeds[id] = f
	s.wg.Add(1)
	go f.read(ctx)
	return f
}

func (s *Server) unfollow(f *runFeed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.streams--; f.streams == 0 {
		delete(s.feeds, f.id)
		f.stop()
	}
}

// read follows the store until ctx ends: at every change, the run's new
// events and its status.
func (f *runFeed) read(ctx context.Context) {
	defer f.s.wg.Done()
	t := f.s.pages["run"]
	var after int64
	for {
		wake := f.s.change.wait()
		status, started, err := f.s.st.Status(ctx, f.id)
		var events []runtime.Event
		last := after
		if err == nil {
			events, last, err = f.s.st.EventsAfter(ctx, f.id, after)
		}
		var msgs []liveMsg
		for i, e := range events {
			var b bytes.Buffer
			v := eventview.Describe(e)
			rw := toRow(last-int64(len(events)-1-i), started, e, v)
			if err = t.ExecuteTemplate(&b, "timelinerow", rw); err != nil {
				break
			}
			msg := map[string]any{"seq": rw.Seq, "row": b.String(), "node": e.Node, "path": e.Path, "state": v.NodeState, "sent": e.Time.UnixMicro()}
			if e.Type == runtime.EventModelTurn && e.Turn != nil {
				msg["cost"], msg["tokens"] = v.CostUSD, v.Tokens
			}
			data, _ := json.Marshal(msg)
			msgs = append(msgs, liveMsg{seq: rw.Seq, data: data})
		}
		after = last
		f.mu.Lock()
		if len(msgs) > 0 || status != f.status || err != nil {
			f.msgs, f.status, f.started, f.err = append(f.msgs, msgs...), status, started, err
			close(f.changed)
			f.changed = make(chan struct{})
		}
		f.mu.Unlock()
		if err != nil {
			return
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return
		}
	}
}

// since returns the rendered events numbered after seq, the run's
// status ("" until first read), a channel closed at the next change, and
// why the feed ended (nil while it runs).
func (f *runFeed) since(seq int64) ([]liveMsg, runtime.Status, <-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := sort.Search(len(f.msgs), func(i int) bool { return f.msgs[i].seq > seq })
	return f.msgs[i:len(f.msgs):len(f.msgs)], f.status, f.changed, f.err
}
