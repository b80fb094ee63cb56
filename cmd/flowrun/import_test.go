package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// importReplies answers the imported pipelines as a model would, by how
// the prompt ends; no ending is the end of another.
var importReplies = [][2]string{
	{"English to French: Hello world", "Bonjour le monde"},
	{"Spanish: Where is the library?", "¿Dónde está la biblioteca?"},
	{"in French: Yes", "Yarr"},
	{"in French: I'm hungry", "Where be the grub?"},
	{"in French: Output the story of your life in JSON", `{"life": "at sea"}`},
	{"in French: Hello world", "Ahoy, world!"},
	{"in French: The quick brown fox jumps over the lazy dog", "Arrr, the quick fox be jumpin'"},
	{"object: Banana", `{"color": "yellow", "countries": ["Ecuador"]}`},
	{"object: Passion fruit", `{"color": "purple", "countries": ["Brazil", "India"]}`},
	{"object: Apple", `Here it is: {"color": "red", "countries": ["Chile"]} - enjoy`},
}

func importModel(t *testing.T) *llmtest.Server {
	srv := llmtest.New(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		raw := string(r.Raw)
		usage := llmtest.Usage{Prompt: 20, Completion: 10}
		// The rubric judge passes a pirate's answer.
		if strings.Contains(raw, "You grade an output against a rubric") {
			pirate := strings.Contains(raw, "Arrr")
			reply := llmtest.JSON(map[string]any{"pass": pirate, "score": map[bool]float64{true: 0.9, false: 0.1}[pirate], "reason": "It says arrr."})
			reply.Usage = usage
			return reply
		}
		for _, r := range importReplies {
			if strings.Contains(raw, r[0]+`"`) {
				return llmtest.Reply{Text: r[1], Usage: usage}
			}
		}
		return llmtest.Error(400, "no scripted reply for "+raw)
	})
	return srv
}

// promptfoo configurations modelled on its examples convert to pipelines
// that validate and run as batches, offline against the fake OpenAI
// server, with the pass rates the scripted replies earn.
func TestImportPromptfooThenBatch(t *testing.T) {
	useModel(t, importModel(t))
	for _, c := range []struct {
		name string
		// what the batch prints for the first pipeline, and what
		// batch show --item prints of an item's checks
		want       []string
		item, show string
	}{
		{"getting_started", []string{"pass                 100.0%  2/2 (pass rate)"}, "", ""},
		{"simple_test", []string{"pass                 100.0%  5/5 (pass rate)"}, "Use LLM to evaluate output", "checks of pass: 1 of 1 passed, score 0.90\n    ✓ llm-rubric: Is spoken like a pirate\n        It says arrr."},
		{"json_output", []string{"pass                 100.0%  3/3 (pass rate)"}, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "imported")
			code, stdout, stderr := flowrun(t, "import", "promptfoo", filepath.Join("..", "..", "importer", "promptfoo", "testdata", c.name, "promptfooconfig.yaml"), "-o", out)
			if code != exitOK || !strings.Contains(stdout, "wrote "+filepath.Join(out, "pipeline.yaml")) {
				t.Fatalf("import: exit %d\n%s\n%s", code, stdout, stderr)
			}
			files, _ := filepath.Glob(filepath.Join(out, "*.yaml"))
			if code, stdout, stderr := flowrun(t, append([]string{"validate"}, files...)...); code != exitOK {
				t.Fatalf("validate: exit %d\n%s\n%s", code, stdout, stderr)
			}
			code, bout, berr := flowrun(t, "batch", filepath.Join(out, "pipeline.yaml"), "--dataset", filepath.Join(out, "dataset.jsonl"), "--store", filepath.Join(dir, "runs.db"))
			if code != exitOK {
				t.Fatalf("batch: exit %d\n%s\n%s", code, bout, berr)
			}
			for _, w := range c.want {
				if !strings.Contains(berr, w) {
					t.Errorf("batch output lacks %q:\n%s", w, berr)
				}
			}
			if c.item == "" {
				return
			}
			if code, out, errOut := flowrun(t, "batch", "show", "last", "--store", filepath.Join(dir, "runs.db"), "--item", c.item); code != exitOK || !strings.Contains(out, c.show) {
				t.Errorf("batch show --item %q: exit %d, want %q in\n%s%s", c.item, code, c.show, out, errOut)
			}
		})
	}
}

// A failing reply fails its item's pass, and the import refuses to write
// over files that are there.
func TestImportPromptfooFailsWhatFailsAndKeepsFiles(t *testing.T) {
	dir := t.TempDir()
	srv := llmtest.New(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Text: "Hola", Usage: llmtest.Usage{Prompt: 20, Completion: 10}}
	})
	useModel(t, srv)
	out := filepath.Join(dir, "imported")
	cfg := filepath.Join("..", "..", "importer", "promptfoo", "testdata", "getting_started", "promptfooconfig.yaml")
	if code, stdout, stderr := flowrun(t, "import", "promptfoo", cfg, "-o", out); code != exitOK {
		t.Fatalf("import: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, bout, berr := flowrun(t, "batch", filepath.Join(out, "pipeline.yaml"), "--dataset", filepath.Join(out, "dataset.jsonl"), "--store", filepath.Join(dir, "runs.db"))
	if code != exitOK || !strings.Contains(berr, "pass                   0.0%  0/2 (pass rate)") {
		t.Fatalf("batch: exit %d\n%s\n%s", code, bout, berr)
	}
	before, _ := os.ReadFile(filepath.Join(out, "pipeline.yaml"))
	code, _, stderr := flowrun(t, "import", "promptfoo", cfg, "-o", out)
	after, _ := os.ReadFile(filepath.Join(out, "pipeline.yaml"))
	if code != exitInvalid || !strings.Contains(stderr, "exists") || string(before) != string(after) {
		t.Fatalf("second import: exit %d\n%s", code, stderr)
	}
}

// An interrupt (the command's context ending) stops an import before it
// writes anything.
func TestImportStopsWhenInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := filepath.Join(t.TempDir(), "imported")
	var stdout, stderr strings.Builder
	cfg := filepath.Join("..", "..", "importer", "promptfoo", "testdata", "getting_started", "promptfooconfig.yaml")
	code := cli(ctx, []string{"import", "promptfoo", cfg, "-o", out}, strings.NewReader(""), &stdout, &stderr)
	if code != exitFailed || !strings.Contains(stderr.String(), "flowrun import: stopped (interrupted); nothing was written") {
		t.Errorf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the output directory: %v", err)
	}
}

// Every prompt is run with every provider, as promptfoo does: the import
// prints a batch line for each pair, not only for the first prompt.
func TestImportPrintsThePromptProviderMatrix(t *testing.T) {
	out := filepath.Join(t.TempDir(), "imported")
	cfg := filepath.Join("..", "..", "importer", "promptfoo", "testdata", "getting_started", "promptfooconfig.yaml")
	code, stdout, stderr := flowrun(t, "import", "promptfoo", cfg, "-o", out)
	if code != exitOK {
		t.Fatalf("import: exit %d\n%s\n%s", code, stdout, stderr)
	}
	dataset := filepath.Join(out, "dataset.jsonl")
	for _, p := range []string{"pipeline.yaml", "pipeline_2.yaml"} {
		for _, model := range []string{"", " --model default=o4-mini"} {
			if line := "  flowrun batch " + filepath.Join(out, p) + " --dataset " + dataset + model + "\n"; !strings.Contains(stdout, line) {
				t.Errorf("no line %q in\n%s", line, stdout)
			}
		}
	}
}

// A configuration whose provider is promptfoo's echo imports as flowrun's
// echo model and runs with no key and no server: each item's output is
// its prompt, and its asserts are checked against it.
func TestImportPromptfooEchoRunsOffline(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	dir := t.TempDir()
	cfg := writeFile(t, dir, "promptfooconfig.yaml", `prompts: ['Say {{word}} back']
providers: [echo]
tests:
  - vars: {word: hello}
    assert: [{type: contains, value: hello}]
  - vars: {word: bye}
    assert: [{type: icontains, value: HELLO}]
`)
	importAndBatch(t, dir, cfg, "pass                  50.0%  1/2 (pass rate)")
	if code, show, _ := flowrun(t, "batch", "show", "last", "--store", filepath.Join(dir, "runs.db"), "--item", "line 2"); code != exitOK ||
		!strings.Contains(show, "text: Say bye back") || !strings.Contains(show, "✗ icontains: HELLO") {
		t.Errorf("batch show --item: exit %d\n%s", code, show)
	}
}

// importInto imports the promptfoo configuration cfg into dir/imported,
// which must exit ok, and returns that directory and what it printed.
func importInto(t *testing.T, dir, cfg string) (out, said string) {
	t.Helper()
	out = filepath.Join(dir, "imported")
	code, stdout, stderr := flowrun(t, "import", "promptfoo", cfg, "-o", out)
	if code != exitOK {
		t.Fatalf("import: exit %d\n%s\n%s", code, stdout, stderr)
	}
	return out, stdout + stderr
}

// importAndBatch imports the promptfoo configuration cfg, which must
// convert whole, into dir/imported and runs its batch into dir/runs.db,
// which must exit ok and print want.
func importAndBatch(t *testing.T, dir, cfg, want string) {
	t.Helper()
	out, said := importInto(t, dir, cfg)
	if strings.Contains(said, "not converted") {
		t.Fatalf("import lists losses:\n%s", said)
	}
	code, bout, berr := flowrun(t, "batch", filepath.Join(out, "pipeline.yaml"), "--dataset", filepath.Join(out, "dataset.jsonl"), "--store", filepath.Join(dir, "runs.db"))
	if code != exitOK || !strings.Contains(berr, want) {
		t.Fatalf("batch: exit %d\n%s\n%s", code, bout, berr)
	}
}

// A translated javascript assert whose JSON.parse meets a reply that is
// not JSON fails that one check with the reason, as promptfoo fails it
// (a not-javascript one too); the item's other checks still count and
// the metric does not error.
func TestImportPromptfooJavascriptOnNonJSONFailsOneCheck(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	dir := t.TempDir()
	cfg := writeFile(t, dir, "promptfooconfig.yaml", `prompts: ['Say {{word}} back']
providers: [echo]
tests:
  - vars: {word: hello}
    assert:
      - {type: contains, value: hello}
      - {type: javascript, value: "JSON.parse(output).word === 'hello'"}
      - {type: not-javascript, value: "JSON.parse(output).word === 'bye'"}
  - vars: {word: bye}
    assert: [{type: contains, value: bye}]
`)
	importAndBatch(t, dir, cfg, "pass                  50.0%  1/2 (pass rate)")
	code, show, _ := flowrun(t, "batch", "show", "last", "--store", filepath.Join(dir, "runs.db"), "--item", "line 1")
	for _, want := range []string{"✓ contains: hello", "✗ javascript: JSON.parse(output).word === 'hello'", "✗ not-javascript: JSON.parse(output).word === 'bye'", "JSON.parse threw: the output is not JSON"} {
		if code != exitOK || !strings.Contains(show, want) {
			t.Errorf("batch show --item lacks %q: exit %d\n%s", want, code, show)
		}
	}
}

// Each llm-rubric is graded by its own judge call, its reason kept and
// its threshold held against the score the judge gives; the item passes
// by promptfoo's rule over all its asserts, weights and the test's
// threshold included.
func TestImportPromptfooRubricThresholdAndWeights(t *testing.T) {
	srv := llmtest.New(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		raw := string(r.Raw)
		if strings.Contains(raw, "You grade an output against a rubric") {
			polite := strings.Contains(raw, "is polite")
			return llmtest.JSON(map[string]any{"pass": true, "score": map[bool]float64{true: 0.9, false: 0.5}[polite], "reason": "graded " + map[bool]string{true: "polite", false: "short"}[polite]})
		}
		return llmtest.Reply{Text: "Thank you, dear friend, for asking so kindly."}
	})
	useModel(t, srv)
	dir := t.TempDir()
	cfg := writeFile(t, dir, "promptfooconfig.yaml", `prompts: ['Reply to {{name}}']
providers: [openai:gpt-4.1-mini]
tests:
  - vars: {name: Ann}
    assert:
      - {type: llm-rubric, value: is polite, threshold: 0.8}
      - {type: llm-rubric, value: is short, threshold: 0.8}
  - vars: {name: Bob}
    threshold: 0.7
    assert:
      - {type: contains, value: Thank, weight: 3}
      - {type: contains, value: Bob}
`)
	out := filepath.Join(dir, "imported")
	if code, stdout, stderr := flowrun(t, "import", "promptfoo", cfg, "-o", out); code != exitOK || strings.Contains(stdout, "not converted") {
		t.Fatalf("import: exit %d\n%s\n%s", code, stdout, stderr)
	}
	store := filepath.Join(dir, "runs.db")
	if code, bout, berr := flowrun(t, "batch", filepath.Join(out, "pipeline.yaml"), "--dataset", filepath.Join(out, "dataset.jsonl"), "--store", store); code != exitOK {
		t.Fatalf("batch: exit %d\n%s\n%s", code, bout, berr)
	}
	for key, want := range map[string]string{
		"line 1": "completed  fail",
		"line 2": "completed  pass",
	} {
		code, show, _ := flowrun(t, "batch", "show", "last", "--store", store, "--item", key)
		if code != exitOK || !strings.Contains(show, want) {
			t.Errorf("%s: want %q in\n%s", key, want, show)
		}
		switch key {
		case "line 1":
			for _, w := range []string{"checks of pass: 1 of 2 passed, score 0.70", "✓ llm-rubric: is polite\n        graded polite", "✗ llm-rubric: is short\n        graded short"} {
				if !strings.Contains(show, w) {
					t.Errorf("%s: want %q in\n%s", key, w, show)
				}
			}
		case "line 2":
			if !strings.Contains(show, "checks of pass: 1 of 2 passed, score 0.75 (threshold 0.7)") || !strings.Contains(show, "✗ contains: Bob") {
				t.Errorf("%s: the threshold and weights are not shown:\n%s", key, show)
			}
		}
	}
	var rubricCalls int
	for _, r := range srv.Requests() {
		if strings.Contains(string(r.Raw), "You grade an output against a rubric") {
			rubricCalls++
		}
	}
	if rubricCalls != 2 {
		t.Errorf("%d judge calls, want one per rubric", rubricCalls)
	}
}

// A configuration written for OpenAI runs offline on echo with --model
// default=echo, as docs/providers.md says, with no key and no server:
// the run and the batch both go, rather than asking for OPENAI_API_KEY.
func TestModelEchoOverrideRunsOffline(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	dir := t.TempDir()
	cfg := writeFile(t, dir, "promptfooconfig.yaml", `prompts: ['Say {{word}} back']
providers: [openai:gpt-4.1-mini]
tests:
  - vars: {word: hello}
    assert: [{type: contains, value: hello}]
`)
	out, _ := importInto(t, dir, cfg)
	pipeline := filepath.Join(out, "pipeline.yaml")
	if code, stdout, stderr := flowrun(t, "run", pipeline, "--input", "word=hi", "--model", "default=echo", "--store", filepath.Join(dir, "runs.db")); code != exitOK || !strings.Contains(stdout, "Say hi back") {
		t.Errorf("run --model default=echo: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, bout, berr := flowrun(t, "batch", pipeline, "--dataset", filepath.Join(out, "dataset.jsonl"), "--model", "default=echo", "--store", filepath.Join(dir, "runs.db"))
	if code != exitOK || !strings.Contains(berr, "pass                 100.0%  1/1") {
		t.Errorf("batch --model default=echo: exit %d\n%s\n%s", code, bout, berr)
	}
	// Without the override, the same batch still asks for a key.
	if code, _, berr := flowrun(t, "batch", pipeline, "--dataset", filepath.Join(out, "dataset.jsonl"), "--store", filepath.Join(dir, "runs.db")); code == exitOK || !strings.Contains(berr, "OPENAI_API_KEY") {
		t.Errorf("batch without a key: exit %d\n%s", code, berr)
	}
}

// An item none of whose asserts could be converted is unscored: the
// batch says how many, and lists them under failures by class, rather
// than counting them silently in a lower pass rate.
func TestImportedUnscoredItemsAreNamed(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	dir := t.TempDir()
	cfg := writeFile(t, dir, "promptfooconfig.yaml", `prompts: ['Say {{word}} back']
providers: [echo]
tests:
  - vars: {word: hello}
    assert: [{type: javascript, value: file://check.js}]
  - vars: {word: bye}
    assert: [{type: contains, value: bye}]
`)
	out, said := importInto(t, dir, cfg)
	if !strings.Contains(said, "not converted") {
		t.Fatalf("import lists no loss:\n%s", said)
	}
	store := filepath.Join(dir, "runs.db")
	if code, bout, berr := flowrun(t, "batch", filepath.Join(out, "pipeline.yaml"), "--dataset", filepath.Join(out, "dataset.jsonl"), "--store", store); code != exitOK || !strings.Contains(berr, "pass                  50.0%  1/2") {
		t.Fatalf("batch: exit %d\n%s\n%s", code, bout, berr)
	}
	code, show, _ := flowrun(t, "batch", "show", "last", "--store", store)
	for _, want := range []string{
		"pass rate  50.0% (1/2)",
		"1 of the items unscored (none of their checks could be checked): not passed",
		"unscored              1  line 1: metric pass: unscored: its one check could not be checked",
	} {
		if code != exitOK || !strings.Contains(show, want) {
			t.Errorf("batch show: exit %d, want %q in\n%s", code, want, show)
		}
	}
}

// A vision eval as promptfoo users write it: a chat prompt in a JSON
// file whose user message has a text part and an image_url part built
// from a file:// image var. The image reaches the model as promptfoo
// sends it, a data URL of the file's bytes in base64, after the text.
func TestImportPromptfooImageParts(t *testing.T) {
	srv := llmtest.New(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "A dog on a mat."} })
	useModel(t, srv)
	dir := t.TempDir()
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDRtiny")
	writeFile(t, dir, "dog.png", string(png))
	writeFile(t, dir, "chat.json", `[{"role": "user", "content": [
  {"type": "text", "text": "{{question}}"},
  {"type": "image_url", "image_url": {"url": "data:image/png;base64,{{image}}"}}]}]`)
	cfg := writeFile(t, dir, "promptfooconfig.yaml", `prompts: file://chat.json
providers: [openai:gpt-4.1-mini]
tests:
  - vars:
      image: file://dog.png
      question: What is in this image?
    assert: [{type: contains, value: dog}]
`)
	importAndBatch(t, dir, cfg, "pass                 100.0%  1/1")
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	var body struct {
		Messages []struct {
			Content []struct {
				Type     string `json:"type"`
				Text     string `json:"text"`
				ImageURL struct {
					URL string `json:"url"`
				} `json:"image_url"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[0].Raw, &body); err != nil || len(body.Messages) != 1 || len(body.Messages[0].Content) != 2 {
		t.Fatalf("request %s: %v", reqs[0].Raw, err)
	}
	parts := body.Messages[0].Content
	if want := "data:image/png;base64," + base64.StdEncoding.EncodeToString(png); parts[0].Text != "What is in this image?" || parts[1].Type != "image_url" || parts[1].ImageURL.URL != want {
		t.Errorf("parts %+v, want the question then the image %s", parts, want)
	}
}

// A Python prompt function, as promptfoo users write one, runs in the
// sandbox: it gets promptfoo's context (the test's vars and the
// provider's id), and the messages it returns are sent as the system and
// the prompt. A function that raises fails its item, naming the error,
// and no model call is made for it.
func TestImportPromptfooPythonPromptFunction(t *testing.T) {
	needPython(t)
	srv := llmtest.New(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "Cats purr."} })
	useModel(t, srv)
	dir := t.TempDir()
	writeFile(t, dir, "prompts.py", `import json

def make(context):
    v = context["vars"]
    return [{"role": "system", "content": "You write for " + context["provider"]["id"] + "."},
            {"role": "user", "content": "One line on " + v["topic"] + " for a " + str(v["age"]) + "-year-old."}]

def broken(context):
    raise ValueError("no template for " + context["vars"]["topic"])
`)
	cfg := writeFile(t, dir, "promptfooconfig.yaml", `prompts: [file://prompts.py:make, file://prompts.py:broken]
providers: [openai:gpt-4.1-mini]
tests:
  - vars: {topic: cats, age: 7}
    assert: [{type: icontains, value: cats}]
`)
	out, said := importInto(t, dir, cfg)
	if !strings.Contains(said, "prompt prompts.py:make: converted approximately: the function runs in the sandbox") {
		t.Fatalf("import does not list the function:\n%s", said)
	}
	store := filepath.Join(dir, "runs.db")
	if code, bout, berr := flowrun(t, "batch", filepath.Join(out, "pipeline.yaml"), "--dataset", filepath.Join(out, "dataset.jsonl"), "--store", store); code != exitOK || !strings.Contains(berr, "pass                 100.0%  1/1") {
		t.Fatalf("batch of make: exit %d\n%s\n%s", code, bout, berr)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || !strings.Contains(string(reqs[0].Raw), `"content":"You write for openai:gpt-4.1-mini.","role":"system"`) ||
		!strings.Contains(string(reqs[0].Raw), `One line on cats for a 7-year-old.`) {
		t.Fatalf("requests: %d\n%s", len(reqs), reqs[0].Raw)
	}
	flowrun(t, "batch", filepath.Join(out, "pipeline_2.yaml"), "--dataset", filepath.Join(out, "dataset.jsonl"), "--store", store)
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d model calls, want none for the function that raised", n-1)
	}
	if code, show, _ := flowrun(t, "batch", "show", "last", "--store", store, "--item", "line 1"); code != exitOK ||
		!strings.Contains(show, "✗ prompt function\n        runtime_error: ") || !strings.Contains(show, "no template for cats") {
		t.Errorf("batch show --item: exit %d\n%s", code, show)
	}
}
