package web

import (
	"fmt"
	"html/template"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/flowrun/flowrun/arc"
	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/eventview"
	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/graph"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/runtime"
)

var funcs = template.FuncMap{
	"pretty": pretty,
	"usd":    figures.USD,
	"when":   func(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") },
	"ms":     figures.Duration,
	"state": func(states map[string]eventview.NodeState, id string) eventview.NodeState {
		if s := states[id]; s != "" {
			return s
		}
		return eventview.NodePending
	},
	"kind":    kindOf,
	"keys":    sortedKeys,
	"add":     func(a, b int) int { return a + b },
	"pct":     func(f float64) string { return fmt.Sprintf("%.1f%%", f*100) },
	"istrue":  func(b *bool) bool { return b != nil && *b },
	"score":   batch.ScoreText,
	"passOf":  scoreClass,
	"lines":   func(y, i int) int { return y + 20 + i*graph.LineHeight },
	"jv":      func(id string, v any) jsonView { return jsonView{ID: id, V: v} },
	"jvw":     func(id string, v any, wants [][][]int) jsonView { return jsonView{ID: id, V: v, Wants: wants} },
	"why":     batch.ItemHTML,
	"pair":    batch.PairHTML,
	"changes": batch.ChangesHTML,
	"fold":    eventview.Fold,
	"long":    eventview.Long,
	"toggle":  toggleOpen,
	"grids":   func(v valueView) template.HTML { return batch.GridsHTML(v.grids()) },
	"val":     func(v any, wants [][][]int) valueView { return valueView{V: v, FieldWants: wants} },
	"at":      func(parent valueView, v any) valueView { return valueView{V: v, Wants: parent.FieldWants} },
	"image":   func(v any) image { s, _ := v.(string); return thumbnail(s) },
	"size":    sizeOf,
	"graphv": func(d *graph.Drawing, states map[string]eventview.NodeState, open map[string]bool, paths map[string]string) graphView {
		return graphView{D: d, States: states, Open: open, Paths: paths, Linked: paths != nil}
	},
	"taken": taken,
	"qctx": func(q *runtime.Question, c *runtime.QuestionContext) questionContext {
		return questionContext{Path: q.Path, Confirm: q.Kind == runtime.QuestionConfirm, C: c}
	},
}

// questionContext is a waiting question's context as its panel shows it.
type questionContext struct {
	Path    string
	Confirm bool
	C       *runtime.QuestionContext
}

// graphView is a pipeline's drawing with its nodes' states; Linked
// boxes open the node's inspector (or unfold a call) on a run's page.
type graphView struct {
	D      *graph.Drawing
	States map[string]eventview.NodeState
	Open   map[string]bool
	Paths  map[string]string
	Linked bool
}

// taken says whether the run went along line ln (app.js markTaken
// applies the same rule as events arrive): from a node that
// finished to one that ran. An on_error line (dashed) is left out: both
// its ends finish whether or not the error happened.
func taken(states map[string]eventview.NodeState, ln graph.Line) bool {
	if ln.Dashed || states[ln.From] != eventview.NodeDone {
		return false
	}
	switch states[ln.To] {
	case eventview.NodeDone, eventview.NodeRunning, eventview.NodeWaiting, eventview.NodeFailed:
		return true
	}
	return false
}

// jsonView is a value shown rendered and as JSON, with a copy button
// for the element ID; Wants are the expected grids its fields' grids
// are compared with (see valueView).
type jsonView struct {
	ID    string
	V     any
	Wants [][][]int
}

// valueView is a value as the value view draws it. Its grids are read
// by arc.Grids, the report's rule: Wants are the expected grids per test
// input they are compared with, and FieldWants those of V's fields. Only
// the fields of a run's or a node's outputs are compared, as the report
// compares an item's output fields: deeper down, or anywhere in an input,
// a list of pairs is not a list of test predictions, and only a value
// that is one grid is drawn.
type valueView struct {
	V                 any
	Wants, FieldWants [][][]int
}

// grids are the grids v draws as, nil when it is no grids.
func (v valueView) grids() []arc.Drawn {
	drawn, ok := arc.Grids(v.V, v.Wants)
	if !ok || (v.Wants == nil && (len(drawn) != 1 || drawn[0].Label != "")) {
		return nil
	}
	return drawn
}

func urlQuery(s string) string { return url.QueryEscape(s) }

// safeURL marks a URL checked by the caller (a raster data URL) as safe
// for an img src.
func safeURL(u string) template.URL { return template.URL(u) }

// pretty is a value as indented JSON, with no HTML escaping of its own:
// html/template escapes the page, and "\u003e" would show as such.
func pretty(v any) string {
	b, err := jsonvalue.MarshalIndent(v, "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// kindOf says how the value view shows v: "grids" (ARC grids, drawn),
// "image" (a raster data URL, as a thumbnail), "map", "list", "text" (a
// string, kept whole) or "scalar".
func kindOf(vv valueView) string {
	if vv.grids() != nil {
		return "grids"
	}
	switch x := vv.V.(type) {
	case map[string]any:
		return "map"
	case []any:
		return "list"
	case string:
		if thumbnail(x).Src != nil {
			return "image"
		}
		return "text"
	}
	return "scalar"
}

// toggleOpen is the ?open= query that draws the call node id open when
// it is folded, folded when it is open, the other open ones as they are.
func toggleOpen(open map[string]bool, id string) string {
	var ids []string
	for c, on := range open {
		if on && c != id {
			ids = append(ids, c)
		}
	}
	if id != "" && !open[id] {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return strings.Join(ids, ",")
}

// sizeOf says how many fields or items a map or list has, for the
// summary of its folded view.
func sizeOf(v any) string {
	n, unit := 0, "item"
	switch x := v.(type) {
	case map[string]any:
		n, unit = len(x), "field"
	case []any:
		n = len(x)
	}
	if n != 1 {
		unit += "s"
	}
	return fmt.Sprintf("%d %s", n, unit)
}

// scoreClass is the class a metric's value is drawn with: pass or fail
// for a boolean, none for the rest.
func scoreClass(v any) string {
	if b, ok := v.(bool); ok {
		return map[bool]string{true: "pass", false: "fail"}[b]
	}
	return "none"
}
