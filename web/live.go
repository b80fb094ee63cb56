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
	changed chan struct{} // closed, and replaced, after every reading
	streams int
	stop    context.CancelFunc

	// A stream trusts only a status read after it joined: the feed reads
	// the store when its mark moves, up to a poll later, so the status it
	// holds can be older than the page that opened the stream. Sent, that
	// older status made the page reload itself once more, taking the
	// click or the text a person was giving it.
	passes     int           // readings started
	statusPass int           // the reading that read status
	poke       chan struct{} // a stream joined: read again now
}

// follow returns the feed of run id with one more stream on it, starting
// one if the run has none, and the first reading the stream may take a
// status from; unfollow lets it go.
func (s *Server) follow(id string) (*runFeed, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.feeds[id]; f != nil {
		f.mu.Lock()
		f.streams++
		join := f.passes + 1
		f.mu.Unlock()
		select {
		case f.poke <- struct{}{}:
		default:
		}
		return f, join
	}
	ctx, stop := context.WithCancel(s.ctx)
	f := &runFeed{s: s, id: id, changed: make(chan struct{}), streams: 1, stop: stop, poke: make(chan struct{}, 1)}
	s.feeds[id] = f
	s.wg.Add(1)
	go f.read(ctx)
	return f, 1
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
// tallies are the run page's counters (by element id) that an event of
// each type adds one to, as runData's Totals count them.
var tallies = map[string]string{
	runtime.EventToolCall:   "tools",
	runtime.EventSandboxRun: "code",
	runtime.EventQuestion:   "questions",
	runtime.EventNodeRetry:  "retries",
}

func (f *runFeed) read(ctx context.Context) {
	defer f.s.wg.Done()
	t := f.s.pages["run"]
	var after int64
	var folded resumes
	for {
		wake := f.s.change.wait()
		f.mu.Lock()
		f.passes++
		pass := f.passes
		f.mu.Unlock()
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
			folded.apply(&rw, e)
			if err = t.ExecuteTemplate(&b, "timelinerow", rw); err != nil {
				break
			}
			msg := map[string]any{"seq": rw.Seq, "row": b.String(), "node": e.Node, "path": e.Path, "state": v.NodeState, "sent": e.Time.UnixMicro()}
			if e.Type == runtime.EventModelTurn && e.Turn != nil {
				msg["cost"], msg["tokens"] = v.CostUSD, v.Tokens
			}
			if tally, ok := tallies[e.Type]; ok {
				msg["tally"] = tally
			}
			data, _ := json.Marshal(msg)
			msgs = append(msgs, liveMsg{seq: rw.Seq, data: data})
		}
		after = last
		f.mu.Lock()
		f.msgs, f.status, f.statusPass, f.started, f.err = append(f.msgs, msgs...), status, pass, started, err
		close(f.changed)
		f.changed = make(chan struct{})
		f.mu.Unlock()
		if err != nil {
			return
		}
		select {
		case <-wake:
		case <-f.poke:
		case <-ctx.Done():
			return
		}
	}
}

// since returns the rendered events numbered after seq, the run's
// status ("" until a reading from join on has read it), a channel closed
// at the next reading, and why the feed ended (nil while it runs).
func (f *runFeed) since(seq int64, join int) ([]liveMsg, runtime.Status, <-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := sort.Search(len(f.msgs), func(i int) bool { return f.msgs[i].seq > seq })
	status := f.status
	if f.statusPass < join {
		status = ""
	}
	return f.msgs[i:len(f.msgs):len(f.msgs)], status, f.changed, f.err
}
