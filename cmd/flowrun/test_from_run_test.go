package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// A shipped pipeline run from its cassette becomes a test case with
// flowrun test --from-run, and flowrun test passes it: for a structured
// output and an agent (triage), a loop of model nodes (approach_proposer),
// code nodes in a loop (default_refine), and model calls of one node in
// map items that run at once (single_pair, arc_evolve), mocked by item.
func TestFromRunCaseOfShippedPipelinesPasses(t *testing.T) {
	for _, name := range []string{"triage", "approach_proposer", "default_refine", "single_pair", "arc_evolve"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "runs.db")
			pipeline := filepath.Join("..", "..", "pipelines", name+".yaml")
			cassette := filepath.Join("..", "..", "pipelines", name+".cassette.yaml")
			if code, _, stderr := flowrun(t, pipeline, "--replay", cassette, "--auto", "--store", db); code != exitOK {
				t.Fatalf("run: exit %d\n%s", code, stderr)
			}
			out := filepath.Join(dir, "tests", name+".test.yaml")
			if err := os.Mkdir(filepath.Dir(out), 0o755); err != nil {
				t.Fatal(err)
			}
			code, _, stderr := flowrun(t, "test", "--from-run", "last", "--store", db, "-o", out)
			if code != exitOK || !strings.Contains(stderr, "wrote "+out) {
				t.Fatalf("--from-run: exit %d\n%s", code, stderr)
			}
			written, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(written), "pipelines/"+name+".yaml\n") {
				t.Errorf("the case does not name its pipeline:\n%s", written)
			}
			code, stdout, stderr := flowrun(t, "test", out)
			if code != exitOK || !strings.Contains(stdout, "1 passed, 0 failed") {
				t.Fatalf("flowrun test: exit %d\n%s\n%s\n%s", code, stdout, stderr, written)
			}
		})
	}
}

// Without -o the case goes to stdout; a run id that is not there is a
// usage error naming it.
func TestFromRunStdoutAndUnknownRun(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	if code, _, stderr := flowrun(t, "../../pipelines/counter.yaml", "--store", db); code != exitOK {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr := flowrun(t, "test", "--from-run", "last", "--store", db)
	if code != exitOK || !strings.Contains(stdout, "pipeline: ../../pipelines/counter.yaml") || !strings.Contains(stdout, "expect:") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, _, stderr = flowrun(t, "test", "--from-run", "nosuchrun", "--store", db)
	if code != exitInvalid || !strings.Contains(stderr, "nosuchrun") {
		t.Fatalf("unknown run: exit %d\n%s", code, stderr)
	}
}

// A run that waited for an answer and was resumed replays as one run: its
// answer is the case's, and the node that waited is in the route once.
func TestFromRunOfAResumedRun(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "greet.yaml", `version: 1
name: greet
models:
  default: {model: gpt-4.1-mini}
nodes:
  - id: draft
    llm: {prompt: "Draft a greeting"}
  - id: who
    ask: {question: "Whom to greet?", schema: {type: string}}
  - id: final
    llm: {prompt: "Greet ${{ nodes.who }}: ${{ nodes.draft.text }}"}
outputs:
  greeting: nodes.final.text
`)
	useGreeter(t)
	db := filepath.Join(dir, "runs.db")
	if code, _, stderr := flowrun(t, p, "--store", db); code != exitOK || !strings.Contains(stderr, "waiting") {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := flowrun(t, "resume", "last", "--answer", "ann", "--store", db); code != exitOK {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	out := filepath.Join(dir, "greet.test.yaml")
	if code, _, stderr := flowrun(t, "test", "--from-run", "last", "--store", db, "-o", out); code != exitOK {
		t.Fatalf("--from-run: exit %d\n%s", code, stderr)
	}
	written, _ := os.ReadFile(out)
	for _, want := range []string{"answers:\n      who: ann\n", "route:\n        - draft\n        - who\n        - final\n", "greeting: Hello, Ann!"} {
		if !strings.Contains(string(written), want) {
			t.Errorf("the case lacks %q:\n%s", want, written)
		}
	}
	if code, stdout, stderr := flowrun(t, "test", out); code != exitOK {
		t.Fatalf("flowrun test: exit %d\n%s\n%s\n%s", code, stdout, stderr, written)
	}
}

// A fork with an edited state variable becomes, with flowrun test
// --from-run, a case that restores the checkpoints it was forked from and
// makes the edit, and flowrun test passes it.
func TestFromRunOfAForkWithAnEdit(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "greet.yaml", greetPipeline)
	useGreeter(t)
	db := filepath.Join(dir, "runs.db")
	code, _, stderr := flowrun(t, p, "--store", db)
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	if code, stdout, stderr := flowrun(t, "resume", "last", "--from", "2", "--set", "state.who=ann", "--store", db); code != exitOK || !strings.Contains(stdout, "Hello, Ann!") {
		t.Fatalf("fork: exit %d\n%s%s", code, stdout, stderr)
	}
	out := filepath.Join(dir, "greet.test.yaml")
	if code, _, stderr := flowrun(t, "test", "--from-run", "last", "--store", db, "-o", out); code != exitOK {
		t.Fatalf("--from-run: exit %d\n%s", code, stderr)
	}
	written, _ := os.ReadFile(out)
	for _, want := range []string{"    restore:\n", "      checkpoint: 2\n", "    edits:\n      state.who: ann\n", "greeting: Hello, Ann!", "who: ann"} {
		if !strings.Contains(string(written), want) {
			t.Errorf("the case lacks %q:\n%s", want, written)
		}
	}
	if code, stdout, stderr := flowrun(t, "test", out); code != exitOK || !strings.Contains(stdout, "1 passed, 0 failed") {
		t.Fatalf("flowrun test: exit %d\n%s\n%s\n%s", code, stdout, stderr, written)
	}
}

// greetPipeline greets whoever its state names, "world" unless a fork
// from its checkpoint 2 edits state.who (useGreeter answers ann by name).
const greetPipeline = `version: 1
name: greet
models:
  default: {model: gpt-4.1-mini}
state:
  who: nobody
nodes:
  - id: draft
    llm: {prompt: "Draft a greeting"}
  - id: pick
    set: {who: '"world"'}
  - id: final
    llm: {prompt: "Greet ${{ state.who }}: ${{ nodes.draft.text }}"}
outputs:
  greeting: nodes.final.text
  who: state.who
`

// useGreeter points the model at a server that says "Hello, Ann!" to a
// prompt that greets ann, and "Hello" to any other.
func useGreeter(t *testing.T) {
	srv := llmtest.New(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(string(r.Raw), "Greet ann") {
			return llmtest.Reply{Text: "Hello, Ann!"}
		}
		return llmtest.Reply{Text: "Hello"}
	})
	useModel(t, srv)
}

// A case made from a failing batch item expects what the dataset row
// expected, not the answer the run gave: it fails now, says why in the
// file, and passes once the pipeline gives the expected answer. When the
// batch's metric compares no output with a dataset field directly, the
// case expects what the run gave and a comment says what the dataset
// expected and why it could not pin it.
func TestFromRunOfAFailingBatchItem(t *testing.T) {
	c := newQACase(t, 2)
	if code, _, stderr := flowrun(t, "batch", c.pipeline, "--dataset", c.data, "--store", c.db); code != exitOK {
		t.Fatalf("batch: exit %d\n%s", code, stderr)
	}
	_, items := batchStore(t, c.db)
	failing := items[1].Run // line 2: the model answers A2, the dataset expects "wrong"
	out := filepath.Join(c.dir, "qa.test.yaml")
	if code, _, stderr := flowrun(t, "test", "--from-run", failing, "--store", c.db, "-o", out); code != exitOK {
		t.Fatalf("--from-run: exit %d\n%s", code, stderr)
	}
	written, _ := os.ReadFile(out)
	for _, want := range []string{"# outputs.answer: what batch ", ", item line 2 expected; the run gave \"A2\"\n",
		"# This case fails until the pipeline gives it.\n    expect:\n", "      answer: wrong\n"} {
		if !strings.Contains(string(written), want) {
			t.Errorf("no %q in the case:\n%s", want, written)
		}
	}
	if code, stdout, _ := flowrun(t, "test", out); code != exitFailed || !strings.Contains(stdout, "0 passed, 1 failed") {
		t.Fatalf("the case of a failing item: exit %d, want it to fail\n%s", code, stdout)
	}
	db := filepath.Join(c.dir, "lower.db")
	if code, _, stderr := flowrun(t, "batch", c.pipeline, "--dataset", c.data, "--store", db, "--score", "exact=lower(outputs.answer) == lower(item.expected)"); code != exitOK {
		t.Fatalf("batch: exit %d\n%s", code, stderr)
	}
	_, items = batchStore(t, db)
	code, stdout, stderr := flowrun(t, "test", "--from-run", items[1].Run, "--store", db)
	if code != exitOK {
		t.Fatalf("--from-run: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{", item line 2 expected:\n", "#   expected: \"wrong\"\n",
		"# its metrics compare no output with a dataset field as outputs.X == item.Y, so the outputs below are what the run gave",
		"      answer: A2\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("no %q in the case:\n%s", want, stdout)
		}
	}

	fixed := strings.Replace(fmt.Sprintf(qaPipeline, ""), "answer: trim(nodes.answer.text)", `answer: 'trim(nodes.answer.text) == "A2" ? "wrong" : trim(nodes.answer.text)'`, 1)
	writeFile(t, c.dir, "qa.yaml", fixed)
	if code, stdout, stderr := flowrun(t, "test", out); code != exitOK || !strings.Contains(stdout, "1 passed, 0 failed") {
		t.Fatalf("the case once the pipeline is fixed: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
