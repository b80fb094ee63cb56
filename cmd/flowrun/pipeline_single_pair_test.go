package main

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// singlePairScript answers single_pair.yaml on its default task (flip the
// grid upside down): one description per training pair, the combined
// rule, then the coder, who mirrors left-right first (refineWrongCode:
// passes pair 1, fails pair 2) and flips the rows once it has the report.
// It tells every request apart by its content alone, so recording twice
// gives the same cassette. It keeps the user messages it was sent.
type singlePairScript struct {
	mu       sync.Mutex
	prompts  map[string][]string // "pair", "combine", "code" -> user messages
	fail429s int                 // answer this many pair requests with a 429 first
}

func (s *singlePairScript) reply(r llmtest.Request) llmtest.Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	usage := llmtest.Usage{Prompt: 300, Completion: 60}
	raw := string(r.Raw)
	kind := ""
	switch {
	case strings.Contains(raw, "You study one training pair"):
		kind = "pair"
	case strings.Contains(raw, "You study ARC puzzles"):
		kind = "combine"
	case strings.Contains(raw, "You write Python 3"):
		kind = "code"
	default:
		return llmtest.Error(400, "unexpected request")
	}
	if s.prompts == nil {
		s.prompts = map[string][]string{}
	}
	s.prompts[kind] = append(s.prompts[kind], lastUserText(r))
	switch kind {
	case "pair":
		if s.fail429s > 0 {
			s.fail429s--
			return llmtest.RateLimited("Retry-After", "0")
		}
		if strings.Contains(raw, "Training pair 1 of") {
			return llmtest.Reply{Text: "The diagonal moves to the other diagonal: each row is mirrored left-right (swapping the two rows gives the same output).", Usage: usage}
		}
		return llmtest.Reply{Text: "The rows are in reverse order: the top row becomes the bottom row; sizes and colours are kept.", Usage: usage}
	case "combine":
		return llmtest.Reply{Text: "Rule: the grid is mirrored. The output has the input's size and colours; pair 1 is a left-right mirror.", Usage: usage}
	}
	if strings.Contains(raw, "Your previous code") {
		return llmtest.Reply{Text: fenced(refineRightCode), Usage: usage}
	}
	return llmtest.Reply{Text: fenced(refineWrongCode), Usage: usage}
}

// singlePairModel is the shipped cassette's script.
func singlePairModel(r llmtest.Request) llmtest.Reply {
	return (&singlePairScript{}).reply(r)
}

// sortedItems sorts, in place, each run of consecutive paths starting with
// prefix: map items finish in any order.
func sortedItems(paths []string, prefix string) []string {
	for i := 0; i < len(paths); {
		j := i
		for j < len(paths) && strings.HasPrefix(paths[j], prefix) {
			j++
		}
		if j > i {
			sort.Strings(paths[i:j])
			i = j
		} else {
			i++
		}
	}
	return paths
}

func TestSinglePairRouteAndSandbox(t *testing.T) {
	script := &singlePairScript{}
	out, events := liveRun(t, shippedPath("single_pair.yaml"), script.reply)
	want := []string{"prepare",
		"describe[0]/pair", "describe[1]/pair", "describe", "combine",
		"refine[1]/code", "refine[1]/test", "refine[1]/score", "refine[1]/record",
		"refine[2]/code", "refine[2]/test", "refine[2]/score", "refine[2]/record",
		"refine"}
	if got := sortedItems(pathsOf(events, "node_finished"), "describe["); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("route:\n got %v\nwant %v", got, want)
	}
	// Each pair's call saw its own pair only.
	pairs := script.prompts["pair"]
	sort.Strings(pairs)
	if len(pairs) != 2 || !strings.Contains(pairs[0], "Training pair 1 of 2") || !strings.Contains(pairs[0], "1 0\n0 1") ||
		strings.Contains(pairs[0], "0 0 2") || !strings.Contains(pairs[1], "Training pair 2 of 2") || !strings.Contains(pairs[1], "1 1 0\n0 0 0\n0 0 2") {
		t.Fatalf("pair prompts:\n%s", strings.Join(pairs, "\n----\n"))
	}
	// The combining step got both descriptions, in pair order.
	combine := script.prompts["combine"]
	if len(combine) != 1 {
		t.Fatalf("%d combine calls", len(combine))
	}
	i1, i2 := strings.Index(combine[0], "Pair 1: The diagonal moves"), strings.Index(combine[0], "Pair 2: The rows are in reverse order")
	if i1 < 0 || i2 < i1 {
		t.Fatalf("combine prompt:\n%s", combine[0])
	}
	// The coder got the combined rule.
	if code := script.prompts["code"]; len(code) != 2 || !strings.Contains(code[0], "Rule: the grid is mirrored.") || !strings.Contains(code[1], "train 2: FAIL 4 pixels off") {
		t.Fatalf("coder prompts:\n%s", strings.Join(code, "\n----\n"))
	}
	// The sandbox really ran both attempts.
	runs := sandboxRuns(events)
	if len(runs) != 2 {
		t.Fatalf("%d sandbox runs, want 2", len(runs))
	}
	if got := fmt.Sprint(runs[0]["result"].([]any)[1].(map[string]any)["output"]); got != "[[0 1 1] [0 0 0] [2 0 0]]" {
		t.Fatalf("first attempt on train 2 produced %s", got)
	}
	if got := fmt.Sprint(runs[1]["result"].([]any)[2].(map[string]any)["output"]); got != "[[0 0 0] [3 3 0] [3 0 0]]" {
		t.Fatalf("second attempt on the test input produced %s", got)
	}
	s := scores(t, out)
	if len(s) != 2 || s[0]["train_passed"] != 1.0 || s[1]["train_passed"] != 2.0 || s[1]["test_passed"] != 1.0 {
		t.Fatalf("scores %v", s)
	}
	rules, _ := out["pair_rules"].([]any)
	if len(rules) != 2 || !strings.HasPrefix(rules[0].(string), "The diagonal moves") || !strings.HasPrefix(rules[1].(string), "The rows are in reverse") {
		t.Fatalf("pair_rules %v", out["pair_rules"])
	}
	if out["solved_train"] != true || out["solved_test"] != true || out["best_iteration"] != 2.0 ||
		out["best_code"] != refineRightCode || !strings.HasPrefix(out["rule"].(string), "Rule: the grid is mirrored") {
		t.Fatalf("outputs %v", out)
	}
}

// A 429 on a pair's call is retried and the run goes on; the map still
// returns the descriptions in pair order.
func TestSinglePairRateLimitedPair(t *testing.T) {
	script := &singlePairScript{fail429s: 1}
	out, events := liveRun(t, shippedPath("single_pair.yaml"), script.reply)
	if script.fail429s != 0 || len(script.prompts["pair"]) != 3 {
		t.Fatalf("the 429 was not retried: %d pair requests", len(script.prompts["pair"]))
	}
	rateLimited := false
	for _, e := range events {
		if (e["type"] == "model_turn" || e["type"] == "node_retry") && strings.Contains(fmt.Sprint(e), "rate_limit") {
			rateLimited = true
		}
	}
	rules, _ := out["pair_rules"].([]any)
	if !rateLimited || len(rules) != 2 || !strings.HasPrefix(rules[1].(string), "The rows are in reverse") || out["solved_train"] != true {
		t.Fatalf("rate limit seen %v, outputs %v", rateLimited, out)
	}
}

// docs/pipelines.md embeds the current graph of single_pair.yaml,
// augmented.yaml and arc_evolve.yaml.
func TestARCVariantsDocumented(t *testing.T) {
	checkDocumented(t, "single_pair.yaml", "augmented.yaml", "arc_evolve.yaml")
}
