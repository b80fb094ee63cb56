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
	"why":     batch.ItemHTML,
	"pair":    batch.PairHTML,
	"changes": batch.ChangesHTML,
	"fold":    eventview.Fold,
	"long":    eventview.Long,
	"toggle":  toggleOpen,
	"grid":    gridPicture,
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
// for the element ID.
type jsonView struct {
	ID string
	V  any
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

// kindOf says how the value view shows v: "grid" (an ARC grid, drawn),
// "image" (a raster data URL, as a thumbnail), "map", "list", "text" (a
// string, kept whole) or "scalar".
func kindOf(v any) string {
	if _, ok := arc.AsGrid(v); ok {
		return "grid"
	}
	switch x := v.(type) {
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

// gridPicture draws v, an ARC grid (kindOf said so), as inline SVG made
// of numbers only: cells of 16 pixels, smaller for large grids so that a
// 30 by 30 grid stays under 300 pixels a side.
func gridPicture(v any) template.HTML {
	g, ok := arc.AsGrid(v)
	if !ok {
		return ""
	}
	cell := min(16, max(4, 300/max(len(g), len(g[0]))))
	return arc.GridSVG(g, nil, cell)
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
