package web

import (
	"encoding/json"
	"net/http"
	"sync"

	"github.com/flowrun/flowrun/arc"
	"github.com/flowrun/flowrun/redact"
	"github.com/flowrun/flowrun/runtime"
)

// liveText is the model text streaming in for the nodes of a run started
// here, by node path: what the page shows while a reply arrives. It lives
// in memory only and is dropped when the reply is recorded, so that
// streaming never changes what the store holds.
type liveText struct {
	mu      sync.Mutex
	turns   int                    // numbers the replies, so a stream sees a new one start
	parts   map[string]*streamPart // by node path
	changed chan struct{}          // closed, and replaced, at every change
}

type streamPart struct {
	turn   int
	text   string
	redact redact.Stream
}

func newLiveText() *liveText {
	return &liveText{parts: map[string]*streamPart{}, changed: make(chan struct{})}
}

func (l *liveText) fire() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// add appends streamed text to path's reply, with any secret it spells
// redacted as the store would redact it.
func (l *liveText) add(path, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.parts[path]
	if p == nil {
		l.turns++
		p = &streamPart{turn: l.turns}
		l.parts[path] = p
	}
	p.text += p.redact.Next(text)
	l.fire()
}

// end drops path's reply: it is recorded now, or its node ended.
func (l *liveText) end(path string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.parts[path]; ok {
		delete(l.parts, path)
		l.fire()
	}
}

// shown is what one live stream has sent of a reply.
type shown struct{ turn, sent int }

// since returns the messages that bring a stream which has sent sent up
// to date (each a JSON object: path, text, and reset when text starts a
// reply over, done when the reply ended), and a channel closed at the
// next change.
func (l *liveText) since(sent map[string]shown) ([][]byte, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var msgs [][]byte
	for path, p := range l.parts {
		s, ok := sent[path]
		switch {
		case !ok || s.turn != p.turn:
			msgs = append(msgs, textMsg(path, p.text, true, false))
		case len(p.text) > s.sent:
			msgs = append(msgs, textMsg(path, p.text[s.sent:], false, false))
		default:
			continue
		}
		sent[path] = shown{turn: p.turn, sent: len(p.text)}
	}
	for path := range sent {
		if _, ok := l.parts[path]; !ok {
			msgs = append(msgs, textMsg(path, "", false, true))
			delete(sent, path)
		}
	}
	return msgs, l.changed
}

func textMsg(path, text string, reset, done bool) []byte {
	b, _ := json.Marshal(map[string]any{"path": path, "text": text, "reset": reset, "done": done})
	return b
}

// endsReply says whether e ends the streamed reply of its path: the turn
// is recorded, or the node ended without one.
func endsReply(e runtime.Event) bool {
	switch e.Type {
	case runtime.EventModelTurn, runtime.EventNodeFinished, runtime.EventNodeFailed, runtime.EventNodeRetry:
		return true
	}
	return false
}

// liveTextOf is the streaming text of run id when it runs here, else nil.
func (s *Server) liveTextOf(id string) *liveText {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.active[id]; a != nil {
		return a.text
	}
	return nil
}

// inspectorPart renders a node's inspector alone, for the run page to
// replace the open one with as the node's events arrive.
func (s *Server) inspectorPart(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, path := r.PathValue("id"), r.URL.Query().Get("path")
	run, err := s.st.Run(ctx, id)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	events, _, err := s.st.EventsAfter(ctx, id, 0)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var points []*runtime.Checkpoint
	if run.Status != runtime.StatusRunning {
		// Reading checkpoints settles a dead process's journal: not while
		// a live one writes.
		if points, err = s.st.Checkpoints(ctx, id, 0); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	s.renderPart(w, "run", "inspector", inspect(path, events, points, arc.TaskTestOutputs(run.Inputs)))
}
