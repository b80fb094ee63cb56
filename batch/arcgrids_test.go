package batch

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestFailingARCItemDrawsItsGrids: an ARC item's outputs as the shipped
// pipelines give them (test_predictions, attempts per test input) and its
// expected test outputs are drawn as grids, each prediction against its
// own test input's expected grid, in the HTML the report and the web UI
// share and in the text of batch show --item; no JSON wall of numbers.
func TestFailingARCItemDrawsItsGrids(t *testing.T) {
	var r Row
	if err := json.Unmarshal([]byte(`{"key": "task-07", "status": "completed",
		"expected": {"test": [{"input": [[1, 1]], "output": [[2, 2]]}, {"input": [[3]], "output": [[4]]}]},
		"outputs": {"test_predictions": [[[2, 0]], [[4]]], "attempts": [{"attempt_1": [[2, 0]], "attempt_2": [[2, 2]]}, {"attempt_1": [[4]], "attempt_2": [[0]]}]}}`), &r); err != nil {
		t.Fatal(err)
	}
	html := string(ItemHTML(&Summary{}, r))
	if n := strings.Count(html, "<svg"); n != 4+6 {
		t.Errorf("the item draws %d grids, want 4 expected (2 inputs, 2 outputs) and 6 outputs (2 predictions, 4 attempts)", n)
	}
	for _, want := range []string{
		`<figcaption>test 1</figcaption>`, `<figcaption>test 2 attempt_2</figcaption>`, `<figcaption>test 1 output</figcaption>`,
		`1x2 grid, 1 cell differs from the expected`, `1x1 grid, as expected`, `1x1 grid, 1 cell differs from the expected`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the item's HTML lacks %s", want)
		}
	}
	if strings.Contains(html, "[[2,0]]") || strings.Contains(html, "[[2, 0]]") {
		t.Error("the item's HTML shows a grid as JSON")
	}
	var text bytes.Buffer
	WriteItemText(&text, &Summary{}, r, 100)
	for _, want := range []string{"test_predictions (test 1): 1x2 grid, 1 cell differs from the expected", "attempts (test 2 attempt_1): 1x1 grid, as expected", "test (test 2 output): 1x1 grid"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("batch show --item lacks %q:\n%s", want, text.String())
		}
	}
}
