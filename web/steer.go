package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/redact"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// human answers a web run's questions: with the answer given in the
// browser for that question, else (auto-advance on) by accepting a
// confirmation or taking an ask's default; otherwise the run waits,
// resumable with the answer. Auto-advance can be switched while the run
// runs.
type human struct {
	auto atomic.Bool

	mu      sync.Mutex
	answers map[string]any // by question path
}

func newHuman(auto bool) *human {
	h := &human{answers: map[string]any{}}
	h.auto.Store(auto)
	return h
}

func (h *human) Answer(_ context.Context, q runtime.Question) (any, bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if a, ok := h.answers[q.Path]; ok {
		delete(h.answers, q.Path)
		return a, true, nil
	}
	if h.auto.Load() {
		a, ok := runtime.AutoAnswer(q)
		return a, ok, nil
	}
	return nil, false, nil
}

// activeRun is a run in progress in this server, or a launch of one
// waiting for a slot.
type activeRun struct {
	cancel context.CancelCauseFunc // of the launch, a queued one's too
	human  *human
	run    *engine.Run   // nil while queued; set under Server.mu
	done   chan struct{} // closed once it is no longer active
	ended  atomic.Bool   // its run ended: only bookkeeping is left
	text   *liveText     // the model text streaming in
}

// replySink ends a reply's streamed text once the reply is recorded, and
// closes begun at the run's first event.
type replySink struct {
	text  *liveText
	once  sync.Once
	begun chan struct{}
}

func (l *replySink) Event(e runtime.Event) {
	l.once.Do(func() { close(l.begun) })
	if endsReply(e) {
		l.text.end(e.Path)
	}
}

// queuedRun is a launch waiting for one of the runs started here to end,
// or one that waited and then could not start (Error).
type queuedRun struct {
	What  string // the pipeline, or the run resumed or forked
	Claim string // the run a resume continues, if any
	Since time.Time
	Error string
}

// keptFailures is how many queued launches that failed to start the runs
// page lists, the latest.
const keptFailures = 20

// launchFailed keeps why a queued launch could not start: nobody waits on
// its request any more, so the runs page shows it.
func (s *Server) launchFailed(q *queuedRun, err error) {
	failed := *q
	failed.Error = redact.String(s.say(err))
	s.mu.Lock()
	s.failures = append(s.failures, failed)
	s.failures = s.failures[max(0, len(s.failures)-keptFailures):]
	s.mu.Unlock()
	s.change.fire()
}

// launchFailures lists the queued launches that failed to start, latest
// first.
func (s *Server) launchFailures() []queuedRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.failures)
	slices.Reverse(out)
	return out
}

// queued lists the launches waiting for a slot, oldest first.
func (s *Server) queued() []queuedRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]queuedRun, len(s.queue))
	for i, q := range s.queue {
		out[i] = *q
	}
	return out
}

// takeSlot takes a run slot if one is free; otherwise it queues q and
// returns false.
func (s *Server) takeSlot(q *queuedRun) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case s.slots <- struct{}{}:
		return true
	default:
	}
	s.queue = append(s.queue, q)
	s.change.fire()
	return false
}

// awaitSlot waits, queued, until a run slot frees or ctx ends, and leaves
// the queue either way; it says whether it got the slot.
func (s *Server) awaitSlot(ctx context.Context, q *queuedRun) bool {
	got := true
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		got = false
	}
	s.mu.Lock()
	s.queue = slices.DeleteFunc(s.queue, func(x *queuedRun) bool { return x == q })
	s.mu.Unlock()
	s.change.fire()
	return got
}

// launch starts a run with start (the engine's Start, Resume, Fork or
// Answer, given o to start it with), owned by the server, and returns the
// run's id, or why it could not start. A resume names the run it
// continues as claim: it is refused while that run is already active
// here (the store lets this process claim its own run). When MaxRuns
// runs started here are running, the launch is queued (listed by queued,
// what naming it) and launch returns "" at once; it starts when a run
// ends.
func (s *Server) launch(h *human, claim, what string, start func(ctx context.Context, o engine.RunOptions) (*engine.Run, error)) (string, error) {
	ctx, cancel := context.WithCancelCause(s.ctx)
	a := &activeRun{cancel: cancel, human: h, done: make(chan struct{}), text: newLiveText()}
	if claim != "" {
		for {
			s.mu.Lock()
			prev := s.active[claim]
			if prev == nil {
				s.active[claim] = a
			}
			s.mu.Unlock()
			if prev == nil {
				break
			}
			// A run whose goroutine has only its bookkeeping left is
			// waited for, and so is one the store has as ended (its
			// record is written, its services not yet closed): a person
			// who presses Yes as soon as the page shows the question
			// must not be told the run is running. Any other (running,
			// queued, or blocked on a question answered here) is
			// refused: waiting could be for ever.
			if !prev.ended.Load() && !s.recordedEnded(claim) {
				cancel(nil)
				return "", fmt.Errorf("run %s is already running", claim)
			}
			<-prev.done
		}
	}
	sink := &replySink{text: a.text, begun: make(chan struct{})}
	o := engine.RunOptions{Sink: sink, OnDelta: a.text.add, Human: h, Remote: true}
	q := &queuedRun{What: what, Claim: claim, Since: time.Now()}
	if s.takeSlot(q) {
		r, err := start(ctx, o)
		if err != nil {
			<-s.slots
			s.release(a, claim)
			return "", err
		}
		s.own(a, claim, r)
		// The page the caller goes to shows the run begun: one that
		// loaded before the run's first event would be replaced by it
		// at once, and a click on it (Yes) lost.
		select {
		case <-sink.begun:
		case <-r.Done():
		}
		return r.ID(), nil
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if !s.awaitSlot(ctx, q) {
			// Taken out of the queue: a stop, or the server closing.
			s.release(a, claim)
			return
		}
		r, err := start(ctx, o)
		if err != nil {
			<-s.slots
			// Nobody waits on the request any more: the runs page says why.
			if ctx.Err() == nil {
				s.launchFailed(q, err)
			}
			s.release(a, claim)
			return
		}
		s.own(a, claim, r)
	}()
	return "", nil
}

// recordedEnded says whether the store has run id as no longer running.
func (s *Server) recordedEnded(id string) bool {
	run, err := s.st.Run(s.ctx, id)
	return err == nil && run.Status != runtime.StatusRunning
}

// own makes r, launched as a, active here under its id until it ends.
func (s *Server) own(a *activeRun, claim string, r *engine.Run) {
	s.mu.Lock()
	a.run = r
	s.active[r.ID()] = a
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		<-r.Done()
		a.ended.Store(true)
		<-s.slots
		s.release(a, r.ID(), claim)
	}()
}

// release makes a, active under ids, no longer active.
func (s *Server) release(a *activeRun, ids ...string) {
	s.mu.Lock()
	for _, id := range ids {
		if id != "" && s.active[id] == a {
			delete(s.active, id)
		}
	}
	s.mu.Unlock()
	a.cancel(nil)
	close(a.done)
}

// resumeRun resumes run (or forks it from from) in the background; with
// answer, it answers the question the run waits on (engine.Answer).
func (s *Server) resumeRun(ctx context.Context, id, from string, answer *given, edits []string) (string, error) {
	run, err := s.st.Run(ctx, id)
	if err != nil {
		return "", err
	}
	if err := s.inside(ctx, run.PipelineAbs); err != nil {
		return "", err
	}
	// The run goes on as it was started (its recorded spec: auto-advance,
	// max loops, models), whichever server or process started it.
	h := newHuman(run.Spec.Auto)
	claim := id
	if from != "" {
		claim = "" // a fork is a new run
	}
	what := "resume of " + id
	if from != "" {
		what = "fork of " + id + " from " + from
	}
	return s.launch(h, claim, what, func(ctx context.Context, o engine.RunOptions) (*engine.Run, error) {
		o.Auto = run.Spec.Auto
		ro := engine.ResumeOptions{RunOptions: o, Edits: edits}
		switch {
		case answer != nil:
			return s.engine.Answer(ctx, id, answer.value, ro)
		case from != "":
			return s.engine.Fork(ctx, id, from, ro)
		}
		return s.engine.Resume(ctx, id, ro)
	})
}

const stopReason = "stopped from the web UI"

// onRun serves an action on the run the path names: it returns to the
// run's page, showing the action's error there when it failed.
func (s *Server) onRun(act func(r *http.Request, id string) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		s.back(w, r, "/runs/"+id, act(r, id))
	}
}

func (s *Server) stop(r *http.Request, id string) error {
	s.mu.Lock()
	a := s.active[id]
	var run *engine.Run
	if a != nil {
		run = a.run
	}
	s.mu.Unlock()
	switch {
	case a == nil:
		// Another process runs it: it sees the request in the store.
		return s.engine.Stop(r.Context(), id, stopReason)
	case run == nil: // queued
		a.cancel(&runtime.StopError{Reason: stopReason})
	default:
		run.Stop(stopReason)
	}
	return nil
}

func (s *Server) resume(r *http.Request, id string) error {
	_, err := s.resumeRun(r.Context(), id, "", nil, nil)
	return err
}

func (s *Server) fork(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	from := strings.TrimSpace(r.FormValue("from"))
	if from == "" {
		s.back(w, r, "/runs/"+id, errors.New("fork: pick a snapshot or a checkpoint to fork from"))
		return
	}
	run, err := s.st.Run(r.Context(), id)
	if err != nil {
		s.back(w, r, "/runs/"+id, err)
		return
	}
	var child string
	edits, err := s.editsFor(r, run, from)
	if err == nil {
		child, err = s.resumeRun(r.Context(), id, from, nil, edits)
	}
	if err != nil {
		s.back(w, r, "/runs/"+id, err)
		return
	}
	http.Redirect(w, r, "/runs/"+child, http.StatusSeeOther)
}

// auto switches auto-advance for a run: at once when it runs here, and
// in its recorded spec for every later resume, from any front end.
func (s *Server) auto(r *http.Request, id string) error {
	on := r.FormValue("auto") == "on"
	run, err := s.st.Run(r.Context(), id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if a := s.active[id]; a != nil {
		a.human.auto.Store(on)
	}
	s.mu.Unlock()
	spec := run.Spec
	spec.Auto = on
	return s.st.SetSpec(r.Context(), id, spec)
}

func (s *Server) snapshot(r *http.Request, id string) error {
	label := strings.TrimSpace(r.FormValue("label"))
	if label == "" {
		return errors.New("snapshot: give it a label")
	}
	_, err := s.st.Snapshot(r.Context(), id, label)
	return err
}

func (s *Server) rollback(r *http.Request, id string) error {
	s.mu.Lock()
	running := s.active[id] != nil
	s.mu.Unlock()
	if running {
		return fmt.Errorf("run %s is running: stop it before rolling it back", id)
	}
	_, err := s.st.Rollback(r.Context(), id, r.FormValue("snapshot"))
	return err
}

// answer answers the question a waiting run asks, and resumes it.
func (s *Server) answer(r *http.Request, id string) error {
	run, err := s.st.Run(r.Context(), id)
	if err != nil {
		return err
	}
	// A waiting run, or one stopped because its confirmation was
	// declined: answering yes runs the node.
	pending := run.Pending
	if pending == nil {
		return fmt.Errorf("run %s is %s, not waiting for an answer", id, run.Status)
	}
	q := *pending
	if err := s.sameQuestion(r, run); err != nil {
		return err
	}
	a, err := readAnswer(r, &q)
	if err != nil {
		return err
	}
	edits, err := s.editsFor(r, run, "")
	if err != nil {
		return err
	}
	_, err = s.resumeRun(r.Context(), id, "", &given{value: a}, edits)
	return err
}

// sameQuestion refuses an answer given on a page older than the
// question the run waits on now: another tab, or an earlier answer that
// went through, moved the run on, and the answer and the state the page
// showed were about a question no longer asked. A form without the
// fields (a script's post) answers the current question.
func (s *Server) sameQuestion(r *http.Request, run *store.Run) error {
	asked := r.PostFormValue("question")
	if asked != "" && asked != run.Pending.Path {
		return fmt.Errorf("this page was about %s, but run %s now waits at %s: the page shows that question now", asked, run.ID, run.Pending.Path)
	}
	shown, err := strconv.Atoi(r.PostFormValue("points"))
	if err != nil {
		return nil
	}
	points, err := s.st.Checkpoints(r.Context(), run.ID, 0)
	if err != nil {
		return err
	}
	if len(points) != shown {
		return fmt.Errorf("run %s went on since this page showed it (%d checkpoints then, %d now): the page shows where it waits now", run.ID, shown, len(points))
	}
	return nil
}

// given is an answer read from the answer form.
type given struct{ value any }

// answerFields is the form for a question's answer: one control per
// property of an object schema, else one control.
func answerFields(q *runtime.Question) []field {
	if q.Kind == runtime.QuestionConfirm {
		return nil
	}
	schema := q.Schema
	if schema == nil {
		schema = map[string]any{"type": "string"}
	}
	props, _ := schema["properties"].(map[string]any)
	if schema["type"] == "object" && len(props) > 0 {
		defaults, _ := q.Default.(map[string]any)
		var out []field
		for _, name := range sortedKeys(props) {
			ps, _ := props[name].(map[string]any)
			def, has := defaults[name]
			f := field{Name: "a." + name, Label: name, Type: typeName(ps)}
			f.Description, _ = ps["description"].(string)
			f.Enum, f.Value = enumAndDefault(ps, def, has)
			f.Long = f.Type == "object" || f.Type == "array"
			out = append(out, f)
		}
		return out
	}
	f := field{Name: "answer", Label: "answer", Type: typeName(schema)}
	f.Enum, f.Value = enumAndDefault(schema, q.Default, q.HasDefault)
	f.Long = f.Type != "boolean" && f.Type != "number" && f.Type != "integer" && f.Enum == nil
	return []field{f}
}

func typeName(schema map[string]any) string {
	if t, ok := schema["type"].(string); ok {
		return t
	}
	return "json"
}

// readAnswer reads the answer form into a value the question's schema
// accepts.
func readAnswer(r *http.Request, q *runtime.Question) (any, error) {
	if q.Kind == runtime.QuestionConfirm {
		switch r.FormValue("answer") {
		case "yes":
			return true, nil
		case "no":
			return false, nil
		}
		return nil, errors.New("answer Yes or No")
	}
	schema := q.Schema
	if schema == nil {
		schema = map[string]any{"type": "string"}
	}
	props, _ := schema["properties"].(map[string]any)
	var a any
	if fs := answerFields(q); len(fs) > 0 && fs[0].Name != "answer" {
		obj := map[string]any{}
		for _, f := range fs {
			name := strings.TrimPrefix(f.Name, "a.")
			if v, ok := r.Form[f.Name]; ok && (v[0] != "" || f.Type == "string") {
				ps, _ := props[name].(map[string]any)
				value, err := engine.ParseAnswer(ps, v[0])
				if err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				obj[name] = value
			}
		}
		a = obj
	} else {
		var err error
		if a, err = engine.ParseAnswer(schema, r.FormValue("answer")); err != nil {
			return nil, err
		}
	}
	if err := jsonvalue.Validate(schema, a); err != nil {
		return nil, fmt.Errorf("the answer does not match the question's schema: %w", err)
	}
	return a, nil
}
