package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
)

var writeSIRChart = flag.Bool("write-sir-chart", false, "rewrite pipelines/examples/sir_chart.png from sirChartPNG")

const (
	sirPipeline = "../../pipelines/sir.yaml"
	sirChart    = "../../pipelines/examples/sir_chart.png"
)

// sirSales is the data the sample chart draws: quarterly sales, one bar
// each, with its value printed above it and its label below.
var sirSales = []struct {
	label string
	value int
	color color.RGBA
}{
	{"Q1", 12, color.RGBA{0x1f, 0x77, 0xb4, 0xff}},
	{"Q2", 18, color.RGBA{0xff, 0x7f, 0x0e, 0xff}},
	{"Q3", 9, color.RGBA{0x2c, 0xa0, 0x2c, 0xff}},
	{"Q4", 15, color.RGBA{0xd6, 0x27, 0x28, 0xff}},
}

// sirGlyphs is a 3x5 bitmap font for the characters the chart prints.
var sirGlyphs = map[rune][5]string{
	'0': {"###", "#.#", "#.#", "#.#", "###"},
	'1': {".#.", "##.", ".#.", ".#.", "###"},
	'2': {"###", "..#", "###", "#..", "###"},
	'3': {"###", "..#", "###", "..#", "###"},
	'4': {"#.#", "#.#", "###", "..#", "..#"},
	'5': {"###", "#..", "###", "..#", "###"},
	'6': {"###", "#..", "###", "#.#", "###"},
	'7': {"###", "..#", "..#", "..#", "..#"},
	'8': {"###", "#.#", "###", "#.#", "###"},
	'9': {"###", "#.#", "###", "..#", "###"},
	'Q': {".#.", "#.#", "#.#", "##.", ".##"},
}

// sirChartPNG draws the sample bar chart of pipelines/examples/sir_chart.png:
// axes, a grid line every 5 units, the four bars, each bar's value above it
// and its quarter below. A paletted image encodes the same bytes every time.
func sirChartPNG() []byte {
	const w, h, base, unit, barW, gap, scale = 240, 170, 140, 6, 30, 18, 2
	white, black, grey := color.RGBA{0xff, 0xff, 0xff, 0xff}, color.RGBA{0, 0, 0, 0xff}, color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	pal := color.Palette{white, black, grey}
	for _, s := range sirSales {
		pal = append(pal, s.color)
	}
	img := image.NewPaletted(image.Rect(0, 0, w, h), pal)
	fill := func(x0, y0, x1, y1 int, c color.Color) {
		for y := y0; y < y1; y++ {
			for x := x0; x < x1; x++ {
				img.Set(x, y, c)
			}
		}
	}
	text := func(x, y int, s string) { // x, y: top left
		for _, r := range s {
			for row, line := range sirGlyphs[r] {
				for col, px := range line {
					if px == '#' {
						fill(x+col*scale, y+row*scale, x+(col+1)*scale, y+(row+1)*scale, black)
					}
				}
			}
			x += 4 * scale
		}
	}
	fill(0, 0, w, h, white)
	for v := 5; v <= 20; v += 5 {
		fill(20, base-v*unit, w-10, base-v*unit+1, grey)
	}
	fill(20, 10, 21, base+1, black)     // y axis
	fill(20, base, w-10, base+1, black) // x axis
	for i, s := range sirSales {
		x := 20 + gap + i*(barW+gap)
		fill(x, base-s.value*unit, x+barW, base, s.color)
		label := strconv.Itoa(s.value)
		tw := len(label)*4*scale - scale
		text(x+(barW-tw)/2, base-s.value*unit-6*scale, label)
		text(x+(barW-(2*4*scale-scale))/2, base+4, s.label)
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, img); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// TestSIRChartIsGenerated checks that the committed sample image is the
// one sirChartPNG draws (-write-sir-chart rewrites it).
func TestSIRChartIsGenerated(t *testing.T) {
	want := sirChartPNG()
	if *writeSIRChart {
		if err := os.WriteFile(sirChart, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(sirChart)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not what sirChartPNG draws (%d bytes, want %d): run go test ./cmd/flowrun -run SIRChart -write-sir-chart", sirChart, len(got), len(want))
	}
	img, err := png.Decode(bytes.NewReader(got))
	if err != nil {
		t.Fatal(err)
	}
	// Each bar's top is where its value says, in its colour.
	for i, s := range sirSales {
		x := 20 + 18 + i*(30+18) + 15
		if c := color.RGBAModel.Convert(img.At(x, 140-s.value*6)).(color.RGBA); c != s.color {
			t.Errorf("bar %s: top pixel %v, want %v", s.label, c, s.color)
		}
		if c := color.RGBAModel.Convert(img.At(x, 140-s.value*6-1)).(color.RGBA); c == s.color {
			t.Errorf("bar %s is taller than %d", s.label, s.value)
		}
	}
}

// sirRole names the sir request's caller by its system prompt
// (pipelines/prompts/sir/*.md, pipelines/tools/*.yaml).
func sirRole(r llmtest.Request) string {
	return callerOf(r, []marker{
		{"You are the translator", "translator"},
		{"You are the reasoner", "reasoner"},
		{"You transcribe the text in images", "ocr"},
		{"You read tables and chart data", "read_table"},
		{"You caption images region by region", "smart_grid_caption"},
	})
}

// sirTurn is what an agent's request shows of the current task: the last
// user message's text and how many assistant turns followed it, and the
// last message's text (a tool result once a tool ran).
func sirTurn(r llmtest.Request) (task string, steps int, last string) {
	msgs, _ := r.Body["messages"].([]any)
	for i := len(msgs) - 1; i >= 0; i-- {
		m, _ := msgs[i].(map[string]any)
		if m["role"] == "assistant" {
			steps++
		}
		if m["role"] == "user" {
			task = contentText(m["content"])
			break
		}
	}
	if len(msgs) > 0 {
		m, _ := msgs[len(msgs)-1].(map[string]any)
		last = contentText(m["content"])
	}
	return task, steps, last
}

var sirImagePath = regexp.MustCompile(`Image path \(pass it to the tools\): (\S+)`)

const (
	sirFirstCaption = "A vertical bar chart of sales by quarter on a white background. Four bars, left to right: " +
		"Q1 (blue), Q2 (orange), Q3 (green), Q4 (red), on a grid with a line every 5 units from 5 to 20. " +
		"Heights by eye: Q2 tallest (a bit below 20), then Q4, Q1, and Q3 shortest (a bit below 10). " +
		"Each bar has a small number printed above it."
	sirFeedback      = "I need each bar's exact value, not an estimate: read the numbers printed above the bars."
	sirSecondCaption = "A vertical bar chart of sales by quarter on a white background, grid lines every 5 units from 5 to 20. " +
		"Bars, left to right, with the value printed above each: Q1 (blue) = 12, Q2 (orange) = 18, Q3 (green) = 9, Q4 (red) = 15. " +
		"Q2 is the tallest bar and Q3 the shortest."
	sirCode = "sales = {'Q1': 12, 'Q2': 18, 'Q3': 9, 'Q4': 15}\n" +
		"hi = max(sales, key=sales.get)\nlo = min(sales, key=sales.get)\n" +
		"print(hi, sales[hi], lo, sales[lo])\n(hi, sales[hi] - sales[lo])"
)

// sirModel answers sir's calls the interesting way: the translator's first
// SIR only estimates the bars, so the reasoner asks it for the printed
// values; its updated SIR has them, and the reasoner computes the answer
// with python_execute and answers from the sandbox's result.
func sirModel(r llmtest.Request) llmtest.Reply {
	usage := llmtest.Usage{Prompt: 900, Completion: 120}
	text := func(s string) llmtest.Reply { return llmtest.Reply{Text: s, Usage: usage} }
	call := func(name string, args map[string]any) llmtest.Reply {
		return llmtest.Reply{ToolCalls: []llmtest.ToolCall{llmtest.Call(name, args)}, Usage: usage}
	}
	task, steps, last := sirTurn(r)
	switch sirRole(r) {
	case "smart_grid_caption":
		return text("Top-left: empty grid. Top-centre: the top of an orange bar, the tallest, with a small number above it. " +
			"Centre: blue, green and red bars; the green one is the shortest. Bottom row: the bars' feet on the x axis, " +
			"labels Q1, Q2, Q3, Q4 below them. The bars compare four quarters.")
	case "ocr":
		return text("12\n18\n9\n15\nQ1 Q2 Q3 Q4")
	case "read_table":
		return text("| quarter | sales |\n|---|---|\n| Q1 | 12 |\n| Q2 | 18 |\n| Q3 | 9 |\n| Q4 | 15 |")
	case "translator":
		img := "examples/sir_chart.png"
		if m := sirImagePath.FindStringSubmatch(task); m != nil {
			img = m[1]
		}
		update := strings.Contains(task, "don't start fresh")
		switch {
		case !update && steps == 0:
			return call("smart_grid_caption", map[string]any{"image": img, "focus": "the bars and their relative heights"})
		case !update:
			return call("terminate_and_output_caption", map[string]any{"global_caption": sirFirstCaption})
		case steps == 0:
			return call("ocr", map[string]any{"image": img, "region": "the numbers printed above the bars, left to right"})
		case steps == 1:
			return call("read_table", map[string]any{"image": img, "focus": "sales by quarter"})
		}
		return call("terminate_and_output_caption", map[string]any{"global_caption": sirSecondCaption})
	case "reasoner":
		switch {
		case !strings.Contains(task, "Q2 (orange) = 18"):
			return call("terminate_and_ask_translator", map[string]any{"feedback": sirFeedback})
		case steps == 0:
			return call("python_execute", map[string]any{"code": sirCode})
		case strings.Contains(last, `"result":["Q2",9]`):
			return call("terminate_and_answer", map[string]any{"answer": "Q2, by 9 (18 against 9 in Q3)"})
		}
		return llmtest.Error(400, "the scripted reasoner did not get the sandbox's result: "+last)
	}
	return llmtest.Error(400, "the scripted model does not know this request")
}

// sirRoute is the node paths the cassette's run starts, in order: the
// reasoner asks the translator once (feedback), then answers. Each tool is
// a pipeline whose one llm node runs under the translator's step.
var sirRoute = []string{
	"refine",
	"refine[1]/translate", "refine[1]/translate[1]/smart_grid_caption/caption",
	"refine[1]/reason", "refine[1]/route", "refine[1]/feedback",
	"refine[2]/translate", "refine[2]/translate[1]/ocr/read", "refine[2]/translate[2]/read_table/read",
	"refine[2]/reason", "refine[2]/route",
}

func TestSIRReplayRouteAndOutputs(t *testing.T) {
	evs := replayRun(t, sirPipeline, sirRoute)
	last := evs[len(evs)-1]
	out, _ := last["outputs"].(map[string]any)
	if last["status"] != "completed" || out["iterations"] != 2.0 || out["answer"] != "Q2, by 9 (18 against 9 in Q3)" ||
		out["sir"] != sirSecondCaption || !jsonEqual(out["sir_history"], []string{sirFirstCaption, sirSecondCaption}) ||
		out["previous_sir"] != sirFirstCaption+"\n\n--- REASONING FEEDBACK ---\n"+sirFeedback {
		t.Fatalf("finished %v", last)
	}

	// The tools ran as pipelines under the translator's steps, and the
	// sandbox really ran the reasoner's code during the replay.
	var tools []string
	var sandbox map[string]any
	for _, e := range evs {
		if e["type"] != "tool_call" {
			continue
		}
		tc := e["tool"].(map[string]any)
		tools = append(tools, e["path"].(string)+" "+tc["name"].(string))
		if tc["name"] == "python_execute" {
			sandbox, _ = tc["result"].(map[string]any)
		}
	}
	wantTools := []string{
		"refine[1]/translate smart_grid_caption", "refine[1]/translate terminate_and_output_caption",
		"refine[1]/reason terminate_and_ask_translator",
		"refine[2]/translate ocr", "refine[2]/translate read_table", "refine[2]/translate terminate_and_output_caption",
		"refine[2]/reason python_execute", "refine[2]/reason terminate_and_answer",
	}
	if !jsonEqual(tools, wantTools) {
		t.Fatalf("tool calls %q\nwant %q", tools, wantTools)
	}
	if sandbox == nil || sandbox["stdout"] != "Q2 18 Q3 9\n" || !jsonEqual(sandbox["result"], []any{"Q2", 9.0}) {
		t.Fatalf("python_execute result %v", sandbox)
	}
}

// TestSIRLiveImageReachesTheModel runs sir live against the fake model and
// checks that the image reached every vision call as a data URL of the
// PNG's bytes (the translator's turns and each tool's call), that the
// reasoner never got it, and that the translator's second task is the
// update of its current SIR with the feedback at its end.
func TestSIRLiveImageReachesTheModel(t *testing.T) {
	m := newFakeModel(t, sirModel)
	code, stdout, stderr := flowrun(t, sirPipeline)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || out["answer"] != "Q2, by 9 (18 against 9 in Q3)" {
		t.Fatalf("outputs %s (%v)", stdout, err)
	}
	png, err := os.ReadFile(sirChart)
	if err != nil {
		t.Fatal(err)
	}
	dataURL := "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
	count := map[string]int{}
	for _, r := range m.requests() {
		role := sirRole(r)
		count[role]++
		has := strings.Contains(string(r.Raw), dataURL)
		switch role {
		case "reasoner":
			if has || r.Model != "gpt-4.1-mini" {
				t.Errorf("reasoner request (model %s) has the image: %v", r.Model, has)
			}
		default:
			if !has || r.Model != "gpt-4.1" {
				t.Errorf("%s request (model %s) lacks the image as a data URL", role, r.Model)
			}
		}
		if role == "translator" {
			task, _, _ := sirTurn(r)
			if strings.Contains(task, "don't start fresh") && !strings.Contains(task, "Current SIR:\n"+sirFirstCaption+"\n\n--- REASONING FEEDBACK ---\n"+sirFeedback) {
				t.Errorf("the update task lacks the SIR with the feedback:\n%s", task)
			}
		}
	}
	want := map[string]int{"translator": 5, "reasoner": 3, "smart_grid_caption": 1, "ocr": 1, "read_table": 1}
	if !jsonEqual(count, want) {
		t.Fatalf("requests by caller %v, want %v", count, want)
	}
}

// TestSIRLiveOwnImageAndOptions passes another image by absolute path (the
// tools resolve it too) and multiple-choice options, which the reasoner
// gets and the translator does not.
func TestSIRLiveOwnImageAndOptions(t *testing.T) {
	m := newFakeModel(t, sirModel)
	img := filepath.Join(t.TempDir(), "chart.png")
	b, err := os.ReadFile(sirChart)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b[:len(b):len(b)], 0) // bytes after IEND: another file, the same picture
	if err := os.WriteFile(img, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := flowrun(t, sirPipeline, "--input", "image="+img, "--input", `options=["Q1","Q2","Q3","Q4"]`)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stdout, `"iterations": 2`) {
		t.Fatalf("outputs %s", stdout)
	}
	dataURL := "data:image/png;base64," + base64.StdEncoding.EncodeToString(b)
	for _, r := range m.requests() {
		role := sirRole(r)
		task, _, _ := sirTurn(r)
		switch {
		case role != "reasoner" && !strings.Contains(string(r.Raw), dataURL):
			t.Errorf("%s request lacks %s as a data URL", role, img)
		case role == "translator" && !strings.Contains(task, "Image path (pass it to the tools): "+img):
			t.Errorf("translator task lacks the image path:\n%s", task)
		case role == "reasoner" && !strings.Contains(task, "Options: Q1; Q2; Q3; Q4\n"):
			t.Errorf("reasoner task lacks the options:\n%s", task)
		case role == "translator" && strings.Contains(task, "Options:"):
			t.Errorf("translator task has the options:\n%s", task)
		}
	}
}

// TestSIRDocumented: docs/pipelines.md embeds the pipeline's current graph.
func TestSIRDocumented(t *testing.T) {
	checkDocumented(t, "sir.yaml")
}

// TestSIRLiveNoAnswerAfterThreeIterations: a reasoner that always asks for
// more ends the loop after 3 iterations with no answer, the feedback of
// each round appended to the SIR the translator was asked to update, and
// the loop recorded as exhausted.
func TestSIRLiveNoAnswerAfterThreeIterations(t *testing.T) {
	_, evs := liveRun(t, sirPipeline, func(r llmtest.Request) llmtest.Reply {
		if sirRole(r) == "reasoner" {
			return llmtest.Reply{ToolCalls: []llmtest.ToolCall{llmtest.Call("terminate_and_ask_translator",
				map[string]any{"feedback": "Say which colour each bar is."})}}
		}
		return sirModel(r)
	})
	last := evs[len(evs)-1]
	out, _ := last["outputs"].(map[string]any)
	history, _ := out["sir_history"].([]any)
	if last["status"] != "completed" || out["answer"] != nil || out["iterations"] != 3.0 || len(history) != 3 ||
		out["previous_sir"] != sirSecondCaption+"\n\n--- REASONING FEEDBACK ---\nSay which colour each bar is." ||
		out["sir"] != sirSecondCaption+"\n\n--- REASONING FEEDBACK ---\nSay which colour each bar is." {
		t.Fatalf("finished %v", last)
	}
	if got := pathsOf(evs, "loop_exhausted"); !jsonEqual(got, []string{"refine"}) {
		t.Fatalf("loop_exhausted events at %q", got)
	}
}
