package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// cachePipeline asks one question; %s completes the model's settings.
const cachePipeline = `
version: 1
name: c
models:
  default: {model: gpt-4.1-mini, price: {input_per_mtok: 1000, output_per_mtok: 2000}%s}
inputs:
  q: {type: string, default: "2+2?"}
nodes:
  - id: ask
    llm: {prompt: "Q: ${{ inputs.q }}"}
outputs:
  answer: nodes.ask.text
`

func cacheServer(t *testing.T) *llmtest.Server {
	t.Helper()
	srv := llmtest.New(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Text("four") })
	useModel(t, srv)
	return srv
}

func runOK(t *testing.T, args ...string) string {
	t.Helper()
	code, stdout, stderr := flowrun(t, args...)
	if code != exitOK {
		t.Fatalf("flowrun %s: exit %d\n%s\n%s", strings.Join(args, " "), code, stdout, stderr)
	}
	return stdout
}

// A second run of the same request is answered by the store: no request,
// $0, and the turn is marked cached in events and in show.
func TestCacheHitAcrossRuns(t *testing.T) {
	srv := cacheServer(t)
	dir := t.TempDir()
	p := writeFile(t, dir, "p.yaml", strings.Replace(cachePipeline, "%s", ", temperature: 0", 1))
	db := filepath.Join(dir, "runs.db")
	runOK(t, "run", p, "--store", db, "--cache", "--json")
	out := runOK(t, "run", p, "--store", db, "--cache", "--json")
	if srv.Calls() != 1 {
		t.Fatalf("the server saw %d requests for two identical runs, want 1", srv.Calls())
	}
	evs := eventsOf(t, out)
	var turn map[string]any
	for _, e := range evs {
		if e["type"] == "model_turn" {
			turn, _ = e["turn"].(map[string]any)
		}
	}
	if turn == nil || turn["cached"] != true || turn["cost_usd"] != nil {
		t.Fatalf("second run's model_turn is not a free cache hit: %v", turn)
	}
	if !strings.Contains(out, `"four"`) {
		t.Fatalf("cached answer missing from the run's output:\n%s", out)
	}
	show := runOK(t, "show", runOf(t, evs), "--store", db)
	if !strings.Contains(show, "cached $0") {
		t.Fatalf("show does not mark the cache hit:\n%s", show)
	}
	stats := runOK(t, "cache", "stats", "--store", db)
	if !strings.Contains(stats, "entries  1\nhits     1\n") {
		t.Fatalf("cache stats:\n%s", stats)
	}
}

// Two batch items sending the same request at once cost one request.
func TestCacheHitAcrossBatch(t *testing.T) {
	srv := cacheServer(t)
	dir := t.TempDir()
	p := writeFile(t, dir, "p.yaml", strings.Replace(cachePipeline, "%s", ", temperature: 0", 1))
	data := writeFile(t, dir, "d.jsonl", "{\"q\": \"same\"}\n{\"q\": \"same\"}\n")
	runOK(t, "batch", p, "--dataset", data, "--store", filepath.Join(dir, "runs.db"), "--cache", "--concurrency", "2")
	if srv.Calls() != 1 {
		t.Fatalf("the server saw %d requests for two identical items, want 1", srv.Calls())
	}
}

// A request differing in prompt, model or temperature is a miss; a model's
// cache: true caches without --cache.
func TestCacheMissWhenRequestDiffers(t *testing.T) {
	srv := cacheServer(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	p := writeFile(t, dir, "p.yaml", strings.Replace(cachePipeline, "%s", ", temperature: 0, cache: true", 1))
	runOK(t, "run", p, "--store", db)
	runOK(t, "run", p, "--store", db, "--input", "q=3+3?")
	runOK(t, "run", p, "--store", db, "--model", "default=gpt-4.1")
	p2 := writeFile(t, dir, "p2.yaml", strings.Replace(cachePipeline, "%s", ", temperature: 0.0001, cache: always", 1))
	runOK(t, "run", p2, "--store", db)
	if srv.Calls() != 4 {
		t.Fatalf("the server saw %d requests for four different ones, want 4", srv.Calls())
	}
	runOK(t, "run", p, "--store", db)
	if srv.Calls() != 4 {
		t.Fatalf("rerunning the first request sent it again (%d requests)", srv.Calls())
	}
}

// cache: true never caches at a temperature above 0 (or an unset one, the
// server's default); cache: always does, on the model or on the node.
func TestCacheNotAtTemperatureAboveZero(t *testing.T) {
	srv := cacheServer(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	for _, settings := range []string{", temperature: 0.7, cache: true", ", cache: true"} {
		p := writeFile(t, dir, "p.yaml", strings.Replace(cachePipeline, "%s", settings, 1))
		before := srv.Calls()
		runOK(t, "run", p, "--store", db, "--cache")
		runOK(t, "run", p, "--store", db, "--cache")
		if srv.Calls()-before != 2 {
			t.Fatalf("with %q two runs sent %d requests, want 2 (not cached)", settings, srv.Calls()-before)
		}
	}
	p := writeFile(t, dir, "p.yaml", strings.Replace(strings.Replace(cachePipeline, "%s", ", temperature: 0.7", 1),
		`llm: {prompt:`, `llm: {cache: always, prompt:`, 1))
	before := srv.Calls()
	runOK(t, "run", p, "--store", db)
	runOK(t, "run", p, "--store", db)
	if srv.Calls()-before != 1 {
		t.Fatalf("a node's cache: always at temperature 0.7: two runs sent %d requests, want 1", srv.Calls()-before)
	}
}

// An entry older than --cache-ttl is a miss and is replaced; clear empties
// the cache.
func TestCacheTTLAndClear(t *testing.T) {
	srv := cacheServer(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	p := writeFile(t, dir, "p.yaml", strings.Replace(cachePipeline, "%s", ", temperature: 0", 1))
	runOK(t, "run", p, "--store", db, "--cache")
	runOK(t, "run", p, "--store", db, "--cache", "--cache-ttl", "1ns")
	if srv.Calls() != 2 {
		t.Fatalf("an expired entry answered: %d requests, want 2", srv.Calls())
	}
	runOK(t, "run", p, "--store", db, "--cache", "--cache-ttl", "1h")
	if srv.Calls() != 2 {
		t.Fatalf("the replaced entry did not answer within its TTL: %d requests", srv.Calls())
	}
	if out := runOK(t, "cache", "clear", "--store", db); !strings.Contains(out, "cleared 1 cached reply") {
		t.Fatalf("cache clear: %s", out)
	}
	if out := runOK(t, "cache", "stats", "--store", db, "--json"); !strings.Contains(out, `"entries":0`) {
		t.Fatalf("stats after clear: %s", out)
	}
	runOK(t, "run", p, "--store", db, "--cache")
	if srv.Calls() != 3 {
		t.Fatalf("a cleared cache still answered: %d requests, want 3", srv.Calls())
	}
}
