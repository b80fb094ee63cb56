package runtimetest

import (
	"sync"

	"github.com/flowrun/flowrun/runtime"
)

// Events is a runtime.EventSink that keeps every event it is sent, in
// the order they arrive. Map items and parallel branches send events
// from their own goroutines, so it locks.
type Events struct {
	mu  sync.Mutex
	all []runtime.Event
}

// Event keeps e.
func (s *Events) Event(e runtime.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all = append(s.all, e)
}

// All is a copy of the events kept so far.
func (s *Events) All() []runtime.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]runtime.Event(nil), s.all...)
}

// Paths are the node paths of the events of type typ kept so far, in
// order: Paths(runtime.EventNodeStarted) says what ran.
func (s *Events) Paths(typ string) []string {
	var out []string
	for _, e := range s.All() {
		if e.Type == typ {
			out = append(out, e.Path)
		}
	}
	return out
}
