package web

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/flowrun/flowrun/arc"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/eventview"
	"github.com/flowrun/flowrun/graph"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
	"github.com/flowrun/flowrun/tokens"
)

// row is one line of a run's timeline.
type row struct {
	Seq         int64
	At          string // since the run started
	Label, Text string
	Path, Node  string
	Class       string
	// Point is the checkpoint the event's node finished with, whose state
	// a click shows; 0 for none.
	Point int64
	// Hidden: a node restored on a resume, which the resume's one row
	// stands for.
	Hidden bool
}

// resumes makes each resume of a run one row: every answer resumes a
// run, and a row for each node the resume restores would repeat the run
// so far once an answer. Its zero value is the state before a run's
// first event; apply is given the events in order.
type resumes struct{ started bool }

// apply makes a run's start after its first the row that says it
// resumed, and hides the nodes restored from their checkpoints (their
// boxes still show them done).
func (f *resumes) apply(rw *row, e runtime.Event) {
	switch e.Type {
	case runtime.EventRunStarted:
		if f.started {
			text := "from its last checkpoint: the steps done before are restored, not run again"
			for _, ed := range e.Edits {
				text += "; edited " + eventview.EditString(ed)
			}
			rw.Label, rw.Text, rw.Class = "resumed", text, "resumed"
		}
		f.started = true
	case runtime.EventNodeRestored:
		rw.Hidden = true
	}
}

// remarshal decodes a value read from the store into a typed one.
func remarshal(from, to any) {
	b, _ := json.Marshal(from)
	_ = json.Unmarshal(b, to)
}

func toRow(seq int64, start time.Time, e runtime.Event, v eventview.View) row {
	at := ""
	if !start.IsZero() {
		at = fmt.Sprintf("+%.2fs", e.Time.Sub(start).Seconds())
	}
	return row{Seq: seq, At: at, Label: v.Tag, Text: v.Text(), Path: e.Path, Node: e.Node, Class: rowClass(v)}
}

// rowClass is a timeline row's CSS class: its tag, and how it went.
func rowClass(v eventview.View) string {
	class := strings.ToLower(v.Tag)
	switch {
	case v.Failed:
		class += " failed"
	case v.Waiting:
		class += " waiting"
	case v.NodeState == eventview.NodeDone:
		class += " done"
	}
	return class
}

// listedPoints is how many of a run's last checkpoints its page lists.
const listedPoints = 50

type totals struct {
	Turns, Tools, Code, Questions, Retries int
	CostUSD                                float64
	Tokens                                 int64
}

type runData struct {
	page
	Run *store.Run
	// PipelineFile is the run's pipeline as the page names it (see shown).
	PipelineFile string
	Duration     time.Duration
	Graph        *graph.Drawing
	GraphError   string
	States       map[string]eventview.NodeState
	Paths        map[string]string // node id -> its latest path, for the inspector
	Rows         []row
	LastSeq      int64
	Totals       totals
	Pending      *runtime.Question
	Answer       []field
	Active       bool
	Auto         bool
	Snapshots    []*store.Snapshot
	Points       []*runtime.Checkpoint
	// RecentPoints are the last checkpoints, listed with a fork button each.
	RecentPoints []*runtime.Checkpoint
	// Steps are the run's state after each checkpoint and its changes;
	// At is the one ?at= selects.
	Steps []eventview.Step
	At    *eventview.Step
	// StateChanged: a step changed the run's state; without one, the
	// panel says so rather than list steps with no changes.
	StateChanged bool
	// ForkState and ForkInputs are the fields of the form that forks from
	// At with edits; WaitState those that edit the state of a waiting run
	// with its answer.
	ForkState, ForkInputs, WaitState []field
	// Wants are the expected grid of each test input of the ARC task the
	// run was given, which the grids of its outputs are drawn against.
	Wants [][][]int
	// Open holds the call nodes drawn open (?open=ID,ID).
	Open map[string]bool
	// Edits are what a person changed before the run (or a resume of it)
	// went on.
	Edits []runtime.Edit
	Forks []*store.Run
	// Children are the runs that served this one: its judges' runs.
	Children []*store.Run
	// InFlight are the run's background model calls still in progress.
	InFlight []string
	Inspect  *inspector
	// Stoppable: running here, or in another process, which polls the
	// store for the stop.
	Stoppable bool
	// Queued: its resume waits for a run slot.
	Queued bool
}

func (s *Server) runPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	run, err := s.st.Run(ctx, id)
	if err != nil {
		s.fail(w, r, http.StatusNotFound, err)
		return
	}
	events, last, err := s.st.EventsAfter(ctx, id, 0)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	d := runData{page: s.page(r, "Run "+id, "runs"), Run: run, PipelineFile: s.shown(cmp.Or(run.PipelineAbs, run.Pipeline)), Wants: arc.TaskTestOutputs(run.Inputs), Duration: runDuration(run), States: map[string]eventview.NodeState{},
		Paths: map[string]string{}, LastSeq: last}
	// The graph is of the pipeline file as the run recorded it, even when
	// the file changed since.
	p, ds := engine.Recorded(run)
	open := map[string]bool{}
	for _, c := range strings.Split(r.URL.Query().Get("open"), ",") {
		open[c] = c != ""
	}
	d.Open = open
	if p != nil {
		d.Graph = graph.LayoutOpen(p, open)
	} else {
		d.GraphError = ds.String()
	}
	d.Rows = make([]row, 0, len(events))
	start := run.Started
	var folded resumes
	for i, e := range events {
		v := eventview.Describe(e)
		if v.NodeState != "" && e.Node != "" {
			d.Paths[e.Node] = e.Path
		}
		d.Edits = append(d.Edits, e.Edits...)
		switch e.Type {
		case runtime.EventModelTurn:
			d.Totals.Turns++
			d.Totals.CostUSD += v.CostUSD
			d.Totals.Tokens += int64(v.Tokens)
		case runtime.EventToolCall:
			d.Totals.Tools++
		case runtime.EventSandboxRun:
			d.Totals.Code++
		case runtime.EventQuestion:
			d.Totals.Questions++
		case runtime.EventNodeRetry:
			d.Totals.Retries++
		}
		rw := toRow(last-int64(len(events)-1-i), start, e, v)
		folded.apply(&rw, e)
		d.Rows = append(d.Rows, rw)
	}
	if run.Status != runtime.StatusRunning {
		d.Totals.CostUSD, d.Totals.Tokens = run.CostUSD, int64(run.Tokens)
	}
	if d.Graph != nil {
		d.States = eventview.BoxStates(p, d.Graph, events, run.Status)
		for _, b := range d.Graph.Boxes {
			// A node inside an open call: its box id is its path there.
			if strings.Contains(b.ID, "/") {
				d.Paths[b.ID] = b.ID
			}
		}
	}
	if q := run.Pending; q != nil {
		d.Pending = q
		d.Answer = answerFields(q)
	}
	d.Auto = run.Spec.Auto
	s.mu.Lock()
	if a := s.active[id]; a != nil {
		d.Active, d.Auto = true, a.human.auto.Load()
	}
	s.mu.Unlock()
	for _, q := range s.queued() {
		d.Queued = d.Queued || q.Claim == id
	}
	d.Stoppable = d.Active || run.Status == runtime.StatusRunning
	if d.Snapshots, err = s.st.Snapshots(ctx, id); err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	if run.Status != runtime.StatusRunning {
		// Reading checkpoints settles a dead process's journal: not while
		// a live one writes.
		if d.Points, err = s.st.Checkpoints(ctx, id, 0); err != nil {
			s.fail(w, r, http.StatusInternalServerError, err)
			return
		}
		d.RecentPoints = d.Points[max(0, len(d.Points)-listedPoints):]
		d.Steps = eventview.Steps(p, d.Points)
		for _, st := range d.Steps {
			d.StateChanged = d.StateChanged || len(st.Changes) > 0
		}
		linkPoints(d.Rows, events, d.Points)
		if at, err := strconv.ParseInt(r.URL.Query().Get("at"), 10, 64); err == nil {
			if st, ok := eventview.StepAt(d.Steps, at); ok {
				d.At = &st
				for i := range d.Rows {
					if d.Rows[i].Point == at {
						d.Rows[i].Class += " selected"
					}
				}
				d.ForkState, d.ForkInputs = editFields(p, st.State, run.Inputs)
			}
		}
		if d.Pending != nil && p != nil {
			d.WaitState, _ = editFields(p, eventview.StateAfter(p, d.Points), nil)
		}
	}
	if forks, _, err := s.st.RunsMatching(ctx, store.RunQuery{Parent: id, BatchItems: true}); err == nil {
		d.Forks = forks
	}
	if children, _, err := s.st.RunsMatching(ctx, store.RunQuery{ChildOf: id, BatchItems: true}); err == nil {
		d.Children = children
	}
	if path := r.URL.Query().Get("path"); path != "" {
		d.Inspect = inspect(path, events, d.Points, d.Wants)
	}
	// A live run's calls are in its events; a stopped or killed one's in
	// its durable records too, which only a run not running is read for.
	var records []store.CheckpointInfo
	if run.Status != runtime.StatusRunning {
		records, _ = s.st.ListCheckpoints(ctx, id)
	}
	d.InFlight = eventview.InFlight(events, records, time.Now())
	s.render(w, http.StatusOK, "run", d)
}

// linkPoints gives each timeline row of a node that finished the
// checkpoint it finished with: the next one of its path not yet given,
// or for a node restored on a resume, the last one given.
func linkPoints(rows []row, events []runtime.Event, points []*runtime.Checkpoint) {
	byPath := map[string][]int64{}
	for _, cp := range points {
		byPath[cp.Path] = append(byPath[cp.Path], cp.Seq)
	}
	given := map[string]int{}
	for i, e := range events {
		seqs := byPath[e.Path]
		switch {
		case len(seqs) == 0:
		case e.Type == runtime.EventNodeFinished && given[e.Path] < len(seqs):
			rows[i].Point = seqs[given[e.Path]]
			given[e.Path]++
		case e.Type == runtime.EventNodeRestored:
			rows[i].Point = seqs[max(0, given[e.Path]-1)]
		}
	}
}

// runLive streams a run's new events (each as its timeline row and its
// node's state) and its status when it changes, from the run's feed,
// which every stream of the run shares.
func (s *Server) runLive(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	status := runtime.Status(r.URL.Query().Get("status"))
	if _, _, err := s.st.Status(r.Context(), id); err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	fl, ok := sse(w)
	if !ok {
		return
	}
	feed, join := s.follow(id)
	defer s.unfollow(feed)
	text, sent := s.liveTextOf(id), map[string]shown{}
	var textChanged <-chan struct{}
	for {
		msgs, cur, changed, err := feed.since(after, join)
		for _, m := range msgs {
			if send(w, fl, "event", m.data) != nil {
				return
			}
			after = m.seq
		}
		if text != nil {
			var parts [][]byte
			parts, textChanged = text.since(sent)
			for _, p := range parts {
				if send(w, fl, "text", p) != nil {
					return
				}
			}
		}
		if cur != "" && cur != status {
			status = cur
			data, _ := json.Marshal(status)
			if send(w, fl, "status", data) != nil {
				return
			}
		}
		if err != nil {
			return
		}
		select {
		case <-changed:
		case <-textChanged:
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		}
	}
}

// inspector is what one node path did: the exchanges with its model, its
// tool calls, its code, its questions and its output.
type inspector struct {
	Path      string
	Kind      string
	Turns     []turnView
	Tools     []*runtime.ToolCall
	Code      []codeView
	Questions []runtime.Event
	Attempts  int
	Output    any
	HasOutput bool
	// Wants are the run's expected grids, which the output's are drawn
	// against.
	Wants    [][][]int
	Failures []runtime.Event
	Duration float64
	CostUSD  float64
	Tokens   int
}

type turnView struct {
	Model     string
	Try       int
	Attempt   int
	Messages  []messageView
	Reply     llm.Response
	HasJSON   bool
	Usage     tokens.Usage
	CostUSD   float64
	LatencyMS float64
	Error     string
	Cached    bool
}

type messageView struct {
	Role      string
	Text      string
	Images    []image
	ToolCalls []llm.ToolCall
}

// image is a thumbnail: Src is set only for a data URL of a raster type,
// Link for an http(s) URL shown as text.
type image struct {
	Src  any
	Link string
}

type codeView struct {
	Language string
	Code     string
	Stdout   string
	Stderr   string
	Error    string
	Class    string
	Duration float64
	Result   any
}

func inspect(path string, events []runtime.Event, points []*runtime.Checkpoint, wants [][][]int) *inspector {
	in := &inspector{Path: path, Wants: wants}
	for _, e := range events {
		if e.Path != path {
			continue
		}
		if e.Kind != "" && e.Type != runtime.EventSandboxRun {
			in.Kind = e.Kind
		}
		switch e.Type {
		case runtime.EventNodeStarted:
			in.Attempts++
		case runtime.EventNodeFinished:
			in.Output, in.HasOutput, in.Duration = e.Output, true, e.DurationMS
		case runtime.EventNodeFailed, runtime.EventNodeRetry:
			in.Failures = append(in.Failures, e)
		case runtime.EventModelTurn:
			if e.Turn == nil {
				continue
			}
			t := turnView{Model: e.Turn.Model, Try: e.Turn.Try, Attempt: e.Turn.Attempt, CostUSD: e.Turn.CostUSD,
				LatencyMS: e.Turn.LatencyMS, Error: e.Turn.Error, Cached: e.Turn.Cached, Usage: e.Turn.Tokens()}
			var msgs []llm.Message
			remarshal(e.Turn.Messages, &msgs)
			for _, m := range msgs {
				mv := messageView{Role: m.Role, Text: m.Text, ToolCalls: m.ToolCalls}
				for _, u := range m.Images {
					mv.Images = append(mv.Images, thumbnail(u))
				}
				t.Messages = append(t.Messages, mv)
			}
			remarshal(e.Turn.Reply, &t.Reply)
			if t.Reply.JSON == nil {
				// An exchange's reply carries the text; the structured
				// output is that text, parsed.
				if text := strings.TrimSpace(t.Reply.Text); strings.HasPrefix(text, "{") || strings.HasPrefix(text, "[") {
					t.Reply.JSON, _ = jsonvalue.Decode([]byte(text))
				}
			}
			t.HasJSON = t.Reply.JSON != nil
			in.CostUSD += t.CostUSD
			in.Tokens += t.Usage.Total
			in.Turns = append(in.Turns, t)
		case runtime.EventToolCall:
			if e.Tool != nil {
				in.Tools = append(in.Tools, e.Tool)
			}
		case runtime.EventSandboxRun:
			c := codeView{Language: e.Kind, Error: e.Error, Class: string(e.Class), Duration: e.DurationMS}
			if out, ok := e.Output.(map[string]any); ok {
				c.Code, _ = out["code"].(string)
				c.Stdout, _ = out["stdout"].(string)
				c.Stderr, _ = out["stderr"].(string)
				c.Result = out["result"]
			}
			in.Code = append(in.Code, c)
		case runtime.EventQuestion:
			in.Questions = append(in.Questions, e)
		}
	}
	if !in.HasOutput {
		for _, cp := range points {
			if cp.Path == path {
				in.Output, in.HasOutput = cp.Output, true
			}
		}
	}
	return in
}

// rasterData is the prefix of the data URLs shown as images; anything
// else (SVG, which can hold script, or any other type) is not.
var rasterData = []string{"data:image/png;base64,", "data:image/jpeg;base64,", "data:image/gif;base64,", "data:image/webp;base64,"}

func thumbnail(u string) image {
	for _, p := range rasterData {
		if strings.HasPrefix(u, p) && base64Chars(u[len(p):]) {
			return image{Src: safeURL(u)}
		}
	}
	if strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
		return image{Link: u}
	}
	return image{Link: "(image: " + filepath.Base(strings.SplitN(u, "\n", 2)[0]) + ")"}
}

func base64Chars(s string) bool {
	for _, c := range s {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=') {
			return false
		}
	}
	return true
}
