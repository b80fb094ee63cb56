package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/runtime/runtimetest"
)

var update = flag.Bool("update", false, "rewrite the event trace goldens in testdata")

// runtimeCase is one testdata/*.yaml file; testdata/README.md describes
// the fields.
type runtimeCase struct {
	Pipeline string            `yaml:"pipeline"`
	Files    map[string]string `yaml:"files"`
	Env      map[string]string `yaml:"env"`
	Trace    string            `yaml:"trace"`
	Repeat   int               `yaml:"repeat"`
	Resume   bool              `yaml:"resume_from_every_checkpoint"`
	Answer   any               `yaml:"answer"`
	Inputs   map[string]any    `yaml:"inputs"`
	Want     caseWant          `yaml:"want"`
	Runs     []caseRun         `yaml:"runs"`
}

type caseRun struct {
	Inputs map[string]any `yaml:"inputs"`
	Want   caseWant       `yaml:"want"`
}

type caseWant struct {
	Status      runtime.Status      `yaml:"status"`
	Outputs     map[string]any      `yaml:"outputs"`
	Error       []string            `yaml:"error"`
	ErrorPrefix string              `yaml:"error_prefix"`
	ErrorClass  errclass.Class      `yaml:"error_class"`
	ErrorPath   string              `yaml:"error_path"`
	Reason      string              `yaml:"reason"`
	Limit       string              `yaml:"limit"`
	Steps       int                 `yaml:"steps"`
	ToolCalls   int                 `yaml:"tool_calls"`
	MaxInFlight []int64             `yaml:"max_in_flight"`
	Events      map[string][]string `yaml:"events"`
	Within      time.Duration       `yaml:"within"`
	Pure        map[string]bool     `yaml:"pure_checkpoints"`
}

// TestCases runs every testdata/*.yaml case: its pipeline with each of its
// inputs, checking what the case wants and the event trace against
// NAME.trace (rewritten by -update).
func TestCases(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 30 {
		t.Fatalf("found %d cases, want at least 30", len(files))
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := readCase(t, file)
			p := loadCase(t, c)
			var trace strings.Builder
			for i, r := range c.Runs {
				if len(c.Runs) > 1 {
					fmt.Fprintf(&trace, "--- run %d\n", i+1)
				}
				trace.WriteString(runCase(t, c, p, r, fmt.Sprintf("run %d (inputs %v)", i+1, r.Inputs)))
			}
			if c.Resume {
				resumeFromEveryCheckpoint(t, c, p)
			}
			if c.Trace != "none" {
				compareGolden(t, strings.TrimSuffix(file, ".yaml")+".trace", trace.String())
			}
		})
	}
}

func readCase(t *testing.T, file string) *runtimeCase {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var c runtimeCase
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if c.Pipeline == "" {
		t.Fatalf("%s: no pipeline", file)
	}
	if !slices.Contains([]string{"", "ordered", "sorted", "none"}, c.Trace) {
		t.Fatalf("%s: trace %q: want ordered, sorted or none", file, c.Trace)
	}
	if len(c.Runs) == 0 {
		c.Runs = []caseRun{{Inputs: c.Inputs, Want: c.Want}}
	} else if c.Inputs != nil || !reflect.DeepEqual(c.Want, caseWant{}) {
		t.Fatalf("%s: inputs and want go under each of runs", file)
	}
	return &c
}

// loadCase writes the case's pipeline as p.yaml, with its files beside
// it, and loads it.
func loadCase(t *testing.T, c *runtimeCase) *dsl.Pipeline {
	t.Helper()
	dir := t.TempDir()
	for name, body := range c.Files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte(c.Pipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	p, ds := dsl.Load(path)
	if p == nil {
		t.Fatalf("load:\n%s", ds)
	}
	return p
}

// options are a case's run options: tool nodes reach pr, env: names read
// the case's env when it has one.
func (c *runtimeCase) options(pr *probe, sink runtime.EventSink) (runtime.Registry, runtime.Options) {
	kinds := nodes.Kinds(nodes.Services{})
	kinds[dsl.KindTool] = pr
	opts := runtime.Options{Sink: sink}
	if c.Env != nil {
		opts.LookupEnv = func(k string) (string, bool) { v, ok := c.Env[k]; return v, ok }
	}
	if c.Answer != nil {
		opts.Human = answerAll{c.Answer}
	}
	return kinds, opts
}

// answerAll is a person who answers every question, and every
// confirmation, with the same answer.
type answerAll struct{ answer any }

func (a answerAll) Answer(context.Context, runtime.Question) (any, bool, error) {
	return a.answer, true, nil
}

// runCase runs p with r's inputs (repeat times) and checks r.Want; it
// returns the event trace of the first run.
func runCase(t *testing.T, c *runtimeCase, p *dsl.Pipeline, r caseRun, what string) string {
	t.Helper()
	var first string
	for rep := range max(c.Repeat, 1) {
		pr := &probe{}
		rec := &runtimetest.Events{}
		kinds, opts := c.options(pr, rec)
		saved := &runtimetest.Checkpoints{}
		if r.Want.Pure != nil {
			opts.Checkpointer = saved
		}
		start := time.Now()
		res := runtime.Run(context.Background(), kinds, p, r.Inputs, opts)
		took := time.Since(start)
		if rep > 0 {
			what = fmt.Sprintf("%s, repetition %d", what, rep+1)
		}
		checkResult(t, what, r.Want, res, rec, pr)
		if got := saved.Pure(); r.Want.Pure != nil && !reflect.DeepEqual(got, r.Want.Pure) {
			t.Errorf("%s: pure checkpoints by path %v\nwant %v", what, got, r.Want.Pure)
		}
		if r.Want.Within > 0 && took > r.Want.Within {
			t.Errorf("%s: took %s, want within %s", what, took, r.Want.Within)
		}
		trace := trace(rec.All(), c.Trace == "sorted")
		if rep == 0 {
			first = trace
		} else if trace != first {
			t.Errorf("%s: trace differs from the first run's:\n%s\nfirst:\n%s", what, trace, first)
		}
	}
	return first
}

func checkResult(t *testing.T, what string, w caseWant, res *runtime.Result, rec *runtimetest.Events, pr *probe) {
	t.Helper()
	status := w.Status
	if status == "" {
		status = runtime.StatusCompleted
	}
	if res.Status != status {
		t.Fatalf("%s: status %s, want %s; err %v, reason %q", what, res.Status, status, res.Err, res.Reason)
	}
	if w.Outputs != nil && !reflect.DeepEqual(normalize(t, res.Outputs), normalize(t, w.Outputs)) {
		t.Errorf("%s: outputs %v\nwant %v", what, res.Outputs, w.Outputs)
	}
	errText := ""
	if res.Err != nil {
		errText = res.Err.Error()
	}
	for _, s := range w.Error {
		if !strings.Contains(errText, s) {
			t.Errorf("%s: error %q, want it to contain %q", what, errText, s)
		}
	}
	if w.ErrorPrefix != "" && !strings.HasPrefix(errText, w.ErrorPrefix) {
		t.Errorf("%s: error %q, want it to start with %q", what, errText, w.ErrorPrefix)
	}
	if w.ErrorClass != "" || w.ErrorPath != "" {
		var ne *runtime.NodeError
		if !errors.As(res.Err, &ne) || ne.Class != w.ErrorClass || ne.Path != w.ErrorPath {
			t.Errorf("%s: error %#v, want a node error of class %q at %q", what, res.Err, w.ErrorClass, w.ErrorPath)
		}
	}
	if !strings.Contains(res.Reason, w.Reason) {
		t.Errorf("%s: reason %q, want it to contain %q", what, res.Reason, w.Reason)
	}
	if res.Limit != w.Limit {
		t.Errorf("%s: stopped by limit %q, want %q", what, res.Limit, w.Limit)
	}
	if w.Steps != 0 && res.Steps != w.Steps {
		t.Errorf("%s: %d steps, want %d", what, res.Steps, w.Steps)
	}
	if w.ToolCalls != 0 && pr.total() != w.ToolCalls {
		t.Errorf("%s: %d tool calls, want %d", what, pr.total(), w.ToolCalls)
	}
	if len(w.MaxInFlight) == 2 {
		if m := pr.maxInFlight(); m < w.MaxInFlight[0] || m > w.MaxInFlight[1] {
			t.Errorf("%s: at most %d tool calls in flight, want %d..%d", what, m, w.MaxInFlight[0], w.MaxInFlight[1])
		}
	}
	for typ, paths := range w.Events {
		if got := rec.Paths(typ); !reflect.DeepEqual(got, paths) && (len(got) != 0 || len(paths) != 0) {
			t.Errorf("%s: %s events at %q, want %q", what, typ, got, paths)
		}
	}
}

// resumeFromEveryCheckpoint kills the case's run after each of its
// checkpoints in turn (by resuming from that prefix), and the resumed run
// after each of its own: every resume must end like the uninterrupted run,
// with its step count, and never call a tool again for a restored node.
func resumeFromEveryCheckpoint(t *testing.T, c *runtimeCase, p *dsl.Pipeline) {
	t.Helper()
	inputs := c.Runs[0].Inputs
	run := func(restore []*runtime.Checkpoint) (*runtime.Result, *probe, *runtimetest.Checkpoints) {
		pr, saved := &probe{}, &runtimetest.Checkpoints{}
		kinds, opts := c.options(pr, nil)
		opts.Checkpointer, opts.Restore = saved, restore
		res := runtime.Run(context.Background(), kinds, p, inputs, opts)
		if res.Status != runtime.StatusCompleted {
			t.Fatalf("status %s, err %v, reason %q", res.Status, res.Err, res.Reason)
		}
		return res, pr, saved
	}
	want, fullProbe, full := run(nil)
	if full.Len() < 15 {
		t.Fatalf("only %d checkpoints", full.Len())
	}
	prefix := func(c *runtimetest.Checkpoints, k int) []*runtime.Checkpoint {
		cps, err := c.Prefix(k)
		if err != nil {
			t.Fatal(err)
		}
		return cps
	}
	for k := 0; k <= full.Len(); k++ {
		restore := prefix(full, k)
		res, pr, again := run(restore)
		if !reflect.DeepEqual(normalize(t, res.Outputs), normalize(t, want.Outputs)) {
			t.Fatalf("resume after %d checkpoints: outputs %v\nwant %v", k, res.Outputs, want.Outputs)
		}
		if res.Steps != want.Steps {
			t.Errorf("resume after %d checkpoints: %d steps, an uninterrupted run takes %d", k, res.Steps, want.Steps)
		}
		ran := pr.calledPaths()
		for _, path := range ran {
			if restoredBy(restore, path) {
				t.Fatalf("resume after %d checkpoints ran %s again", k, path)
			}
		}
		for _, path := range fullProbe.calledPaths() {
			if restoredBy(restore, path) {
				ran = append(ran, path)
			}
		}
		slices.Sort(ran)
		if wantPaths := fullProbe.calledPaths(); !slices.Equal(ran, wantPaths) {
			t.Fatalf("resume after %d checkpoints: tool calls, run or restored, at %v\nwant %v", k, ran, wantPaths)
		}
		for j := 0; j <= again.Len(); j++ {
			res, _, _ := run(append(prefix(full, k), prefix(again, j)...))
			if res.Steps != want.Steps {
				t.Errorf("resume after %d checkpoints, resumed again after %d more: %d steps, an uninterrupted run takes %d", k, j, res.Steps, want.Steps)
			}
		}
	}
}

// restoredBy says whether restoring these checkpoints stands for the node
// at path: it, or a node enclosing it, was restored.
func restoredBy(restore []*runtime.Checkpoint, path string) bool {
	for _, cp := range restore {
		if path == cp.Path || strings.HasPrefix(path, cp.Path+"/") || strings.HasPrefix(path, cp.Path+"[") {
			return true
		}
	}
	return false
}

func compareGolden(t *testing.T, golden, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run the test with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("event trace differs from %s (run with -update to accept):\n%s", golden, got)
	}
}

// normalize makes a value what the store would give back: JSON numbers
// as int where integral.
func normalize(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jsonvalue.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// trace is one line per event: its type, path, and class, status or
// attempt where it has one; sorted for a case whose events interleave.
func trace(events []runtime.Event, sorted bool) string {
	lines := make([]string, 0, len(events))
	for _, ev := range events {
		line := ev.Type
		if ev.Path != "" {
			line += " " + ev.Path
		}
		if ev.Class != "" {
			line += " class=" + string(ev.Class)
		}
		if ev.Status != "" {
			line += " status=" + string(ev.Status)
		}
		if ev.Type == runtime.EventNodeRetry {
			line += fmt.Sprintf(" attempt=%d", ev.Attempt)
		}
		lines = append(lines, line)
	}
	if sorted {
		slices.Sort(lines)
	}
	return strings.Join(lines, "\n") + "\n"
}

// probe is what tool nodes run in a case: a stand-in for any kind with
// side effects, told what to do by its args. It returns value after
// sleep_ms milliseconds (or the run's cancellation), or fails with error
// (of class class) on the first fail_calls calls at its path (every call
// without fail_calls). It counts calls and how many were in flight.
type probe struct {
	mu       sync.Mutex
	calls    map[string]int
	inFlight int64
	maxSeen  int64
}

func (p *probe) Execute(ctx context.Context, s *runtime.Scope, n *dsl.Node) (runtime.Outcome, error) {
	path := s.Path(n.ID)
	p.mu.Lock()
	if p.calls == nil {
		p.calls = map[string]int{}
	}
	p.calls[path]++
	call := p.calls[path]
	p.inFlight++
	p.maxSeen = max(p.maxSeen, p.inFlight)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inFlight--
		p.mu.Unlock()
	}()
	args, err := s.EvalValue(n.Tool().Args)
	if err != nil {
		return runtime.Outcome{}, err
	}
	a, _ := args.(map[string]any)
	if d, ok := a["sleep_ms"].(int); ok {
		select {
		case <-time.After(time.Duration(d) * time.Millisecond):
		case <-ctx.Done():
			return runtime.Outcome{}, ctx.Err()
		}
	}
	if msg, _ := a["error"].(string); msg != "" {
		if limit, ok := a["fail_calls"].(int); !ok || call <= limit {
			class, _ := a["class"].(string)
			if class == "" {
				return runtime.Outcome{}, errors.New(msg)
			}
			return runtime.Outcome{}, runtime.Errorf(errclass.Class(class), "%s", msg)
		}
	}
	return runtime.Outcome{Output: a["value"]}, nil
}

// total is the number of calls.
func (p *probe) total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.calls {
		n += c
	}
	return n
}

// calledPaths are the paths called, one per call, sorted.
func (p *probe) calledPaths() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for path, c := range p.calls {
		for range c {
			out = append(out, path)
		}
	}
	slices.Sort(out)
	return out
}

// maxInFlight is the most calls that ran at once.
func (p *probe) maxInFlight() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.maxSeen
}
