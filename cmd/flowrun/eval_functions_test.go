package main

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/jsonvalue"
)

// The evaluation functions work in a batch's score: section: each item's
// metrics are what they compute from the model's answer and the item.
func TestBatchScoresWithEvalFunctions(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "qa.yaml", fmt.Sprintf(qaPipeline, "")+`  close: similarity(outputs.answer, item.expected)
  rouge: rouge_l(outputs.answer + " extra", item.expected)
  answer_is_json: json_valid(outputs.answer)
  item_fits: 'matches_schema(item, {"type": "object", "required": ["expected", "question"]})'
`)
	data := writeFile(t, dir, "qa.jsonl", `{"question": "q1", "expected": "A1"}
{"question": "q2", "expected": "B2"}
{"question": "q12"}
`)
	_, srv := newQAModel(t, 0)
	useModel(t, srv)
	db := filepath.Join(dir, "runs.db")
	if code, stdout, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db); code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	_, items := batchStore(t, db)
	want := []map[string]any{
		{"close": 1.0, "rouge": 2.0 / 3, "answer_is_json": false, "item_fits": true}, // A1 extra vs A1: P 1/2, R 1
		{"close": 0.5, "rouge": 0.0, "answer_is_json": false, "item_fits": true},
		{"answer_is_json": false, "item_fits": false},
	}
	// An item without expected has no text to compare: the metric is
	// missing and the item says why.
	if it := items[2]; it.Scores["close"] != nil || it.Class != "score" || !strings.Contains(it.Error, "similarity: wants two texts, got string and null") {
		t.Errorf("item without expected: %+v", it)
	}
	for i, it := range items {
		for name, w := range want[i] {
			got := it.Scores[name]
			if f, ok := w.(float64); ok {
				if g, isNum := jsonvalue.Number(got); !isNum || math.Abs(g-f) > 1e-9 {
					t.Errorf("item %d %s = %#v, want %v", i, name, got, w)
				}
			} else if got != w {
				t.Errorf("item %d %s = %#v, want %v", i, name, got, w)
			}
		}
	}
}
