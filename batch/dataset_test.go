package batch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
)

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func load(t *testing.T, dir, src string) *dsl.Pipeline {
	t.Helper()
	p, ds := dsl.Load(write(t, dir, "p.yaml", src))
	if p == nil {
		t.Fatal(ds)
	}
	return p
}

const taskPipeline = `
version: 1
name: arc
inputs:
  task: {type: object, default: {train: [], test: []}}
  use_images: {type: boolean, default: false}
nodes:
  - id: a
    set: {}
outputs:
  n: len(inputs.task.train)
`

// A directory's files are items named by their file names; a file whose
// fields name no input is the whole value of the one object input.
func TestDatasetDirectoryGivesWholeFiles(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "tasks")
	_ = os.Mkdir(data, 0o755)
	write(t, data, "b2.json", `{"train": [{"input": [[1]], "output": [[2]]}], "test": []}`)
	write(t, data, "a1.json", `{"task": {"train": [], "test": []}, "use_images": true}`)
	write(t, data, "c3.json", `{"train": [`)
	write(t, data, "notes.txt", "not an item")
	d, err := ReadDataset(data)
	if err != nil {
		t.Fatal(err)
	}
	p := load(t, dir, taskPipeline)
	var got []string
	for _, it := range d.Items {
		in, err := Inputs(p, it, nil)
		got = append(got, fmt.Sprintf("%s %v %v", it.Key, in, err != nil))
	}
	want := []string{
		"a1 map[task:map[test:[] train:[]] use_images:true] false",
		"b2 map[task:map[test:[] train:[map[input:[[1]] output:[[2]]]]]] false",
		"c3 map[] true",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("items\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(d.Items[2].Err.Error(), "c3.json: not JSON") {
		t.Fatalf("error %v", d.Items[2].Err)
	}
}

const qPipeline = `
version: 1
name: q
inputs:
  question: {type: string}
  n: {type: integer, default: 1}
nodes:
  - id: a
    set: {}
outputs:
  q: inputs.question
`

// CSV rows are text; an integer input parses its field; --map names the
// field an input comes from; ids that are unique name the items.
func TestDatasetCSVMapAndKeys(t *testing.T) {
	dir := t.TempDir()
	p := load(t, dir, qPipeline)
	d, err := ReadDataset(write(t, dir, "d.csv", "id,text,n\nx,hello,3\ny,\"bye\",4\n"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseMap(p, []string{"question=text"})
	if err != nil {
		t.Fatal(err)
	}
	in, err := Inputs(p, d.Items[1], m)
	if err != nil || d.Items[1].Key != "y" || fmt.Sprint(in) != "map[n:4 question:bye]" {
		t.Fatalf("%s: %v %v", d.Items[1].Key, in, err)
	}
	if _, err := ParseMap(p, []string{"questoin=text"}); err == nil || !strings.Contains(err.Error(), `no input "questoin" (did you mean "question"?)`) {
		t.Fatalf("bad --map: %v", err)
	}
	if _, err := Inputs(p, d.Items[0], map[string]string{"question": "txt"}); err == nil || !strings.Contains(err.Error(), `d.csv:2 (row 1): no field "txt" for input "question" (mapped question=txt) (did you mean "text"?)`) {
		t.Fatalf("missing mapped field: %v", err)
	}
}

// A YAML list names items "item N" unless every one has a distinct id.
func TestDatasetListKeys(t *testing.T) {
	dir := t.TempDir()
	d, err := ReadDataset(write(t, dir, "l.yaml", "- {id: 1, question: a}\n- {id: 1, question: b}\n- 7\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Items[0].Key != "item 1" || d.Items[1].Key != "item 2" || d.Items[2].Err == nil || !strings.Contains(d.Items[2].Err.Error(), "l.yaml:3 (item 3): an item must be an object of fields, not a number") {
		t.Fatalf("%v %v %v", d.Items[0].Key, d.Items[1].Key, d.Items[2].Err)
	}
	if _, err := ReadDataset(write(t, dir, "d.txt", "x")); err == nil || !strings.Contains(err.Error(), `unknown format ".txt"`) {
		t.Fatalf("unknown format: %v", err)
	}
}

// --filter, then --sample (the same seed picks the same items), then --limit.
func TestSelectFilterSampleLimit(t *testing.T) {
	var items []*Item
	for i := range 20 {
		items = append(items, &Item{Index: i, Value: map[string]any{"level": []string{"easy", "hard"}[i%2]}})
	}
	items = append(items, &Item{Index: 20, Err: fmt.Errorf("broken")})
	pick := func(sel Selection) string {
		out, err := Select(items, sel)
		if err != nil {
			t.Fatal(err)
		}
		var idx []string
		for _, it := range out {
			idx = append(idx, fmt.Sprint(it.Index))
		}
		return strings.Join(idx, ",")
	}
	if got := pick(Selection{Filter: `item.level == "easy"`, Limit: 3}); got != "0,2,4" {
		t.Fatalf("filter+limit: %s", got)
	}
	if got := pick(Selection{Filter: `item.level == "hard"`}); !strings.HasSuffix(got, ",19,20") {
		t.Fatalf("a broken item is kept: %s", got)
	}
	a, b, c := pick(Selection{Sample: 5, Seed: 1}), pick(Selection{Sample: 5, Seed: 1}), pick(Selection{Sample: 5, Seed: 2})
	if a != b || a == c || len(strings.Split(a, ",")) != 5 {
		t.Fatalf("samples %s %s %s", a, b, c)
	}
	if _, err := Select(items, Selection{Filter: "item.level +"}); err == nil || !strings.Contains(err.Error(), "--filter") {
		t.Fatalf("bad filter: %v", err)
	}
}

// A --filter is evaluated within the expression budget: a bomb fails with
// expression_limit, naming the filter and the item, instead of taking
// gigabytes.
func TestSelectFilterBudget(t *testing.T) {
	items := []*Item{{Index: 0, Where: "d.jsonl:1", Value: map[string]any{"q": "a"}}}
	bomb := `repeat(repeat("x", 999999), 999999) != ""`
	_, err := Select(items, Selection{Filter: bomb})
	if errclass.Of(err) != errclass.ExpressionLimit || !strings.Contains(err.Error(), "--filter") || !strings.Contains(err.Error(), "d.jsonl:1") {
		t.Fatalf("filter bomb: %v (class %q)", err, errclass.Of(err))
	}
	loop := `len(filter(1..100000000, # > 0)) > 0`
	if _, err := Select(items, Selection{Filter: loop}); errclass.Of(err) != errclass.ExpressionLimit {
		t.Fatalf("filter loop: %v (class %q)", err, errclass.Of(err))
	}
}

// TestDatasetCassettePrefersThePipelines: a dataset ships one cassette per
// pipeline it serves offline (PIPELINE.cassette.yaml in a directory,
// NAME.PIPELINE.cassette.yaml beside a file), and a cassette.yaml or
// NAME.cassette.yaml for the others.
func TestDatasetCassettePrefersThePipelines(t *testing.T) {
	dir := t.TempDir()
	tasks := filepath.Join(dir, "tasks")
	if err := os.Mkdir(tasks, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tasks/cassette.yaml", "tasks/evolve.cassette.yaml", "qa.jsonl", "qa.cassette.yaml", "qa.judge.cassette.yaml"} {
		write(t, dir, name, "version: 1\nentries: []\n")
	}
	for _, c := range []struct{ dataset, pipeline, want string }{
		{tasks, "pipelines/evolve.yaml", filepath.Join(tasks, "evolve.cassette.yaml")},
		{tasks, "pipelines/refine.yaml", filepath.Join(tasks, "cassette.yaml")},
		{filepath.Join(dir, "qa.jsonl"), "judge.yaml", filepath.Join(dir, "qa.judge.cassette.yaml")},
		{filepath.Join(dir, "qa.jsonl"), "sir.yaml", filepath.Join(dir, "qa.cassette.yaml")},
		{filepath.Join(dir, "other.jsonl"), "sir.yaml", ""},
	} {
		if got := Cassette(c.dataset, c.pipeline); got != c.want {
			t.Errorf("Cassette(%s, %s) = %q, want %q", c.dataset, c.pipeline, got, c.want)
		}
	}
}

// TestOfflineCassette checks that a batch replays its dataset's cassette
// only when its pipeline calls a model the environment gives no key or
// endpoint for.
func TestOfflineCassette(t *testing.T) {
	dir := t.TempDir()
	dataset := write(t, dir, "qa.jsonl", "{}\n")
	cassette := write(t, dir, "qa.cassette.yaml", "version: 1\nentries: []\n")
	llmPipeline := write(t, dir, "ask.yaml", "version: 1\nname: ask\nmodels:\n  default: {model: gpt-4.1-mini}\nnodes:\n  - id: a\n    llm: {prompt: hi}\n")
	setPipeline := write(t, dir, "set.yaml", "version: 1\nname: set\nnodes:\n  - id: s\n    set: {}\n")
	none := func(string) (string, bool) { return "", false }
	keyed := func(name string) (string, bool) { return "sk-test", name == "OPENAI_API_KEY" }
	for _, c := range []struct {
		name     string
		pipeline string
		models   []string
		env      func(string) (string, bool)
		want     string
	}{
		{"no key", llmPipeline, nil, none, cassette},
		{"a key", llmPipeline, nil, keyed, ""},
		{"no model call", setPipeline, nil, none, ""},
		{"--model default=echo", llmPipeline, []string{"default=echo"}, none, ""},
	} {
		p, ds := dsl.Load(c.pipeline)
		if p == nil {
			t.Fatal(ds)
		}
		if got := OfflineCassette(dataset, p, c.models, c.env); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestReadSelected checks that the items a selection picks come back in
// dataset order with the dataset, and that a selection of none is an
// error naming the dataset rather than a batch of no item.
func TestReadSelected(t *testing.T) {
	path := write(t, t.TempDir(), "d.jsonl", "{\"n\": 1}\n{\"n\": 2}\n{\"n\": 3}\n")
	d, items, err := ReadSelected(path, Selection{Filter: "item.n >= 2"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Path != path || d.Hash == "" || len(d.Items) != 3 || len(items) != 2 || items[0].Key != "line 2" {
		t.Fatalf("dataset %s (%d items), selected %d, want 2 of 3 from line 2", d.Path, len(d.Items), len(items))
	}
	_, _, err = ReadSelected(path, Selection{Filter: "item.n > 3"})
	if err == nil || err.Error() != "no item of "+path+" is selected" {
		t.Fatalf("empty selection: %v", err)
	}
}
