package web

import (
	"context"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// tinyPNG is a 1x1 PNG as a data URL.
const tinyPNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

// pictureOutputs are a run's outputs with a picture of each kind, and
// values that look like one but are not.
var pictureOutputs = map[string]any{
	"grid":     []any{[]any{0.0, 1.0, 2.0}, []any{3.0, 4.0, 5.0}, []any{6.0, 7.0, 8.0}},
	"not_grid": []any{[]any{10.0, 1.0}, []any{1.0, 1.0}},
	"ragged":   []any{[]any{1.0, 2.0}, []any{3.0}},
	"image":    tinyPNG,
	"svg":      "data:image/svg+xml;base64,PHN2Zz4=",
	"tree":     map[string]any{"deep": map[string]any{"list": []any{"<script>alert(1)</script>", 2.0}}},
}

// recordRun stores a finished run of the chat pipeline with outputs.
func recordRun(t *testing.T, h *harness, id string, outputs map[string]any) {
	t.Helper()
	ctx := context.Background()
	if err := h.st.CreateRun(ctx, &store.Run{ID: id, Pipeline: "chat.yaml", PipelineAbs: h.dir + "/chat.yaml", PipelineName: "chat", PipelineSrc: chatPipeline,
		Inputs: map[string]any{"topic": "pictures"}}); err != nil {
		t.Fatal(err)
	}
	if err := h.st.Finish(ctx, id, store.Ending{Status: runtime.StatusCompleted, Outputs: outputs}); err != nil {
		t.Fatal(err)
	}
}

// TestOutputsShowPictures: an ARC grid in the outputs is drawn as a
// coloured SVG grid (a 3x3 grid: nine cells), a raster data URL as a
// thumbnail that opens full size, nested values as a folding tree; a
// list of lists with a 10 or of unequal rows, an SVG data URL and markup
// in text are not pictures.
func TestOutputsShowPictures(t *testing.T) {
	h := newHarness(t, "")
	recordRun(t, h, "20260101T000000-pictures", pictureOutputs)
	code, page := h.get("/runs/20260101T000000-pictures")
	if code != 200 {
		t.Fatalf("%d\n%s", code, page)
	}
	_, outputs, _ := strings.Cut(page, `<section class="outputs">`)
	outputs, _, _ = strings.Cut(outputs, `</section>`)
	if n := strings.Count(outputs, `<svg class="arc-grid"`); n != 1 {
		t.Fatalf("%d grids drawn, want 1:\n%s", n, outputs)
	}
	_, svg, _ := strings.Cut(outputs, `<svg class="arc-grid"`)
	svg, _, _ = strings.Cut(svg, `</svg>`)
	if n := strings.Count(svg, "<rect "); n != 9 || !strings.Contains(svg, "3x3 grid") {
		t.Fatalf("the grid has %d cells, want 9:\n%s", n, svg)
	}
	for _, want := range []string{
		`<details class="picture"><summary><img class="thumb" src="` + tinyPNG,
		`<img class="full" src="` + tinyPNG,
		`<details class="tree" open><summary>6 fields</summary>`,
		`<summary>2 items</summary>`,
		`&lt;script&gt;alert(1)&lt;/script&gt;`,
		`data:image/svg&#43;xml;base64,PHN2Zz4=`,
	} {
		if !strings.Contains(outputs, want) {
			t.Errorf("the outputs lack %s:\n%s", want, outputs)
		}
	}
	if strings.Contains(outputs, "<script>") || strings.Contains(outputs, `src="data:image/svg`) {
		t.Errorf("markup or an SVG image reached the page:\n%s", outputs)
	}
}

// TestRunOutputsDrawGridsAgainstTheTask: a run of an ARC task draws its
// outputs' grids as the report does (arc.Grids): test predictions and
// attempts per test input, each captioned and against the task's
// expected test output, the wrong cell outlined; a nested list of pairs
// and the inputs' train pairs are not test predictions.
func TestRunOutputsDrawGridsAgainstTheTask(t *testing.T) {
	h := newHarness(t, "")
	ctx := context.Background()
	id := "20260101T000000-arc"
	pair := func(in, out string) string { return `{"input": ` + in + `, "output": ` + out + `}` }
	task := decodeJSON(t, `{"train": [`+pair(`[[1]]`, `[[2]]`)+`], "test": [`+pair(`[[1, 2], [3, 4]]`, `[[4, 3], [2, 1]]`)+`]}`)
	outputs := decodeJSON(t, `{"test_predictions": [[[4, 3], [2, 0]]], "attempts": [{"attempt_1": [[4, 3], [2, 1]], "attempt_2": [[4, 3], [2, 0]]}],
		"report": {"train": [`+pair(`[[1]]`, `[[2]]`)+`]}}`).(map[string]any)
	if err := h.st.CreateRun(ctx, &store.Run{ID: id, Pipeline: "chat.yaml", PipelineAbs: h.dir + "/chat.yaml", PipelineName: "chat", PipelineSrc: chatPipeline,
		Inputs: map[string]any{"task": task}}); err != nil {
		t.Fatal(err)
	}
	if err := h.st.Finish(ctx, id, store.Ending{Status: runtime.StatusCompleted, Outputs: outputs}); err != nil {
		t.Fatal(err)
	}
	code, page := h.get("/runs/" + id)
	if code != 200 {
		t.Fatalf("%d\n%s", code, page)
	}
	_, out, _ := strings.Cut(page, `<section class="outputs">`)
	out, _, _ = strings.Cut(out, `</section>`)
	for _, caption := range []string{"test 1", "test 1 attempt_1", "test 1 attempt_2"} {
		if !strings.Contains(out, "<figcaption>"+caption+"</figcaption>") {
			t.Errorf("no grid captioned %q in the outputs:\n%s", caption, out)
		}
	}
	// The wrong cell of the prediction and of attempt_2 is outlined;
	// attempt_1 is right.
	if n := strings.Count(out, `stroke-dasharray`); n != 2 {
		t.Errorf("%d cells outlined, want 2 (one in the prediction, one in attempt_2):\n%s", n, out)
	}
	if strings.Contains(out, "<figcaption>test 1 input</figcaption>") {
		t.Errorf("the report's train pairs are drawn as test pairs:\n%s", out)
	}
	_, in, _ := strings.Cut(page, `<section class="inputs">`)
	in, _, _ = strings.Cut(in, `</section>`)
	if strings.Contains(in, "<figcaption>") || strings.Count(in, `<svg class="arc-grid"`) != 4 {
		t.Errorf("the inputs' four grids are not drawn each as one grid, uncompared:\n%s", in)
	}
}

func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	v, err := jsonvalue.Decode([]byte(s))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}
