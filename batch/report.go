package batch

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"time"

	"github.com/flowrun/flowrun/eventview"
	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/redact"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

//go:embed report.html.tmpl
var reportSource string

// reportScript is the report's one script: it opens linked timelines and
// filters the items.
//
//go:embed report.js
var reportScript string

// ReportCSP is the Content-Security-Policy a served report needs: inline
// styles and SVG, and its own script, allowed by its hash.
var ReportCSP = func() string {
	sum := sha256.Sum256([]byte(reportScript))
	return "default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-" +
		base64.StdEncoding.EncodeToString(sum[:]) + "'; frame-ancestors 'none'"
}()

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"pct":   func(r float64) string { return fmt.Sprintf("%.1f%%", 100*r) },
	"usd":   figures.USD,
	"ms":    figures.Duration,
	"score": ScoreText,
	"runID": func(run string) string { return "run-" + run },
	"signed": func(v float64, unit string) string {
		if unit == "%" {
			return fmt.Sprintf("%+.1f points", 100*v)
		}
		if unit == "$" {
			return figures.USDChange(v)
		}
		return figures.DurationChange(v)
	},
	"f1":      func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"deref":   func(p *bool) bool { return *p },
	"pair":    PairHTML,
	"changes": ChangesHTML,
	"failing": func(r Row) string { return map[bool]string{true: "1", false: "0"}[failing(r)] },
	"failsOf": failsOf,
	"script":  func() template.JS { return template.JS(reportScript) },
	"item":    func(Row) template.HTML { return "" }, // replaced per report, with its summary
}).Parse(reportSource))

// Longest text of one timeline entry the report shows; the rest is cut
// with a note, so that one huge reply cannot make the page unusable.
const maxEntryText = 4000

// report is what the template renders.
type report struct {
	Generated string
	S         *Summary
	C         *Comparison
	Metrics   []string       // the score columns of the item table
	Columns   int            // of the item table
	Outcomes  map[int]string // by B's item index
	Pass      passChart
	Cost      costChart
	Timelines []timeline
}

// WriteReport writes batch b's report as one self-contained HTML page:
// inline CSS and SVG, no script, font or image from anywhere else, each
// item's run timeline embedded under an anchor of the run's id. With
// against, the page compares against that batch (A) too. Everything the
// store holds is escaped as text and secrets are redacted.
func WriteReport(ctx context.Context, st *store.Store, w io.Writer, b, against *store.Batch) error {
	s, err := SummarizeDetailed(ctx, st, b)
	if err != nil {
		return err
	}
	r := &report{Generated: time.Now().Format("2006-01-02 15:04:05"), S: s, Outcomes: map[int]string{}}
	type ref struct{ run, key, side string }
	var runs []ref
	var base *Summary
	side := ""
	if against != nil {
		if base, err = SummarizeDetailed(ctx, st, against); err != nil {
			return err
		}
		r.C = compare(base, s)
		if r.C.Changes, err = ChangesBetween(ctx, st, against, b); err != nil {
			return err
		}
		for _, p := range r.C.Pairs {
			r.Outcomes[p.B.Index] = p.Outcome
		}
		side = "B"
	}
	for _, row := range s.Rows {
		runs = append(runs, ref{row.Run, row.Name, side})
	}
	if r.C != nil {
		for _, p := range append(append([]Pair{}, r.C.Fixed...), r.C.Broken...) {
			runs = append(runs, ref{p.A.Run, p.Key, "A"})
		}
	}
	for _, m := range s.Metrics {
		r.Metrics = append(r.Metrics, m.Name)
	}
	r.Columns = len(r.Metrics) + 8
	if s.Primary != "" {
		r.Columns-- // the primary has the pass column
	}
	if r.C != nil {
		r.Columns++
	}
	r.Pass = newPassChart(s, base)
	r.Cost = newCostChart(s, base)
	for _, ref := range runs {
		if ref.run == "" {
			continue
		}
		tl, err := readTimeline(ctx, st, ref.run)
		if err != nil {
			return fmt.Errorf("batch %s: report: run %s: %w", b.ID, ref.run, err)
		}
		tl.Key, tl.Side = ref.key, ref.side
		r.Timelines = append(r.Timelines, *tl)
	}
	tmpl, err := reportTemplate.Clone()
	if err != nil {
		return fmt.Errorf("batch %s: report: %w", b.ID, err)
	}
	tmpl.Funcs(template.FuncMap{"item": func(row Row) template.HTML { return ItemHTML(s, row) }})
	var page strings.Builder
	if err := tmpl.Execute(&page, r); err != nil {
		return fmt.Errorf("batch %s: report: %w", b.ID, err)
	}
	_, err = io.WriteString(w, redact.String(page.String()))
	return err
}

// ScoreText is a metric value as one table cell shows it.
func ScoreText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case bool:
		if x {
			return "✓"
		}
		return "✗"
	case string:
		return x
	case float64:
		return fmt.Sprintf("%.4g", x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Geometry of the charts, in SVG user units.
const (
	chartWidth  = 540
	labelWidth  = 110
	plotWidth   = chartWidth - labelWidth - 130 // room for the label right of the widest whisker
	barHeight   = 18
	barGap      = 4
	groupGap    = 14
	histHeight  = 160
	histBins    = 12
	histPadLeft = 34
)

type passBar struct {
	Series            string // "A" or "B"
	Y, Width          float64
	Low, High, Label  string
	LowX, HighX, MidY float64
	CapTop, CapBottom float64
	TextX             float64
}

type passGroup struct {
	Name    string
	Primary bool
	LabelY  float64
	Bars    []passBar
}

type passChart struct {
	Width, Height float64
	LabelX, PlotX float64
	Groups        []passGroup
	Ticks         []tick
}

type tick struct {
	X      float64
	Label  string
	Anchor string // text-anchor
}

// newPassChart draws each boolean metric as a bar with its Wilson
// interval as an error bar; with a base batch, A's bar above B's.
func newPassChart(s, base *Summary) passChart {
	c := passChart{Width: chartWidth, LabelX: labelWidth - 8, PlotX: labelWidth}
	y := 24.0
	for _, m := range s.Metrics {
		if m.Rate == nil {
			continue
		}
		g := passGroup{Name: m.Name, Primary: m.Primary}
		var rates []struct {
			series string
			r      *Rate
		}
		if base != nil {
			for _, bm := range base.Metrics {
				if bm.Name == m.Name && bm.Rate != nil {
					rates = append(rates, struct {
						series string
						r      *Rate
					}{"A", bm.Rate})
				}
			}
		}
		rates = append(rates, struct {
			series string
			r      *Rate
		}{"B", m.Rate})
		g.LabelY = y + float64(len(rates))*(barHeight+barGap)/2 + 4
		for _, sr := range rates {
			x := func(v float64) float64 { return labelWidth + v*plotWidth }
			g.Bars = append(g.Bars, passBar{Series: sr.series, Y: y, Width: sr.r.Rate * plotWidth,
				LowX: x(sr.r.Low), HighX: x(sr.r.High), MidY: y + barHeight/2, CapTop: y + 4, CapBottom: y + barHeight - 4, TextX: x(sr.r.High) + 6,
				Label: fmt.Sprintf("%.1f%% (%d/%d)", 100*sr.r.Rate, sr.r.Passed, sr.r.N),
				Low:   fmt.Sprintf("%.1f%%", 100*sr.r.Low), High: fmt.Sprintf("%.1f%%", 100*sr.r.High)})
			y += barHeight + barGap
		}
		c.Groups = append(c.Groups, g)
		y += groupGap
	}
	for i := 0; i <= 4; i++ {
		c.Ticks = append(c.Ticks, tick{X: labelWidth + float64(i)/4*plotWidth, Label: fmt.Sprintf("%d%%", i*25), Anchor: "middle"})
	}
	c.Height = y + 16
	return c
}

type histBar struct {
	Series     string
	X, Y, W, H float64
	Count      int
	From, To   string
}

type costChart struct {
	Width, Height, Base float64
	PlotX, AxisX        float64
	Bars                []histBar
	Ticks               []tick
	MaxCount            int
	Items               int
}

// newCostChart is a histogram of the per-item cost of the items that
// ran; with a base batch, A's and B's bars side by side in each bin.
func newCostChart(s, base *Summary) costChart {
	c := costChart{Width: chartWidth, Height: histHeight + 40, Base: histHeight + 10, PlotX: histPadLeft, AxisX: histPadLeft - 6}
	series := []struct {
		name string
		rows []Row
	}{{"B", s.Rows}}
	if base != nil {
		series = []struct {
			name string
			rows []Row
		}{{"A", base.Rows}, {"B", s.Rows}}
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, sr := range series {
		for _, r := range sr.rows {
			if r.Run != "" {
				lo, hi = math.Min(lo, r.CostUSD), math.Max(hi, r.CostUSD)
				c.Items++
			}
		}
	}
	if c.Items == 0 {
		return c
	}
	if hi-lo <= 1e-12 {
		// Every item cost the same: one bar in the middle of the middle
		// bin rather than on an edge (at 0 when they were free).
		w := hi / histBins
		lo = hi - (histBins/2+0.5)*w
		if hi == 0 {
			lo, w = 0, 1e-5
		}
		hi = lo + histBins*w
	}
	width := (hi - lo) / histBins
	counts := make([][]int, len(series))
	for i, sr := range series {
		counts[i] = make([]int, histBins)
		for _, r := range sr.rows {
			if r.Run == "" {
				continue
			}
			bin := min(int((r.CostUSD-lo)/width), histBins-1)
			counts[i][bin]++
			c.MaxCount = max(c.MaxCount, counts[i][bin])
		}
	}
	edges := make([]float64, histBins+1)
	for i := range edges {
		edges[i] = lo + float64(i)*width
	}
	labels := figures.USDLabels(edges)
	binW := float64(chartWidth-histPadLeft-20) / histBins
	barW := (binW - 4) / float64(len(series))
	for bin := range histBins {
		for i, sr := range series {
			n := counts[i][bin]
			h := float64(n) / float64(c.MaxCount) * histHeight
			c.Bars = append(c.Bars, histBar{Series: sr.name, X: histPadLeft + float64(bin)*binW + 2 + float64(i)*barW, W: barW,
				Y: c.Base - h, H: h, Count: n, From: labels[bin], To: labels[bin+1]})
		}
	}
	ticks := []int{0, histBins / 2, histBins}
	tickLabels := figures.USDLabels([]float64{edges[ticks[0]], edges[ticks[1]], edges[ticks[2]]})
	for i, anchor := range []string{"start", "middle", "end"} {
		c.Ticks = append(c.Ticks, tick{X: histPadLeft + float64(ticks[i])*binW, Label: tickLabels[i], Anchor: anchor})
	}
	return c
}

// timeline is one run's events as the report shows them.
type timeline struct {
	Run, Key, Pipeline, Error, Reason string
	Status                            runtime.Status
	Side                              string // "A" or "B" in a comparison
	Started                           string
	DurationMS, CostUSD               float64
	Tokens                            int
	Entries                           []entry
}

type entry struct {
	At       string // offset from the run's start
	Kind     string // the event's tag (eventview.View.Tag)
	Path     string
	What     string
	Outcome  string
	Duration float64
	Text     string
	Failed   bool
	Left     float64 // the bar: start and length, in percent of the run
	Width    float64
}

func readTimeline(ctx context.Context, st *store.Store, runID string) (*timeline, error) {
	r, err := st.Run(ctx, runID)
	if err != nil {
		return nil, err
	}
	events, err := st.Events(ctx, runID)
	if err != nil {
		return nil, err
	}
	end := r.Finished
	if end.IsZero() {
		end = r.Updated
	}
	tl := &timeline{Run: r.ID, Pipeline: r.PipelineName, Status: r.Status, Error: r.Error, Reason: r.Reason,
		Started: r.Started.Format("2006-01-02 15:04:05"), CostUSD: r.CostUSD, Tokens: r.Tokens}
	start := r.Started
	if len(events) > 0 && events[0].Time.Before(start) {
		start = events[0].Time
	}
	span := ms(end.Sub(start))
	for _, e := range events {
		if last := e.Time.Sub(start); ms(last) > span {
			span = ms(last)
		}
	}
	tl.DurationMS = span
	for _, e := range events {
		en := timelineEntry(e)
		en.At = "+" + figures.Duration(ms(e.Time.Sub(start)))
		if span > 0 {
			began := ms(e.Time.Sub(start)) - en.Duration
			en.Left = math.Max(0, 100*began/span)
			en.Width = math.Min(100-en.Left, math.Max(0.3, 100*en.Duration/span))
		}
		tl.Entries = append(tl.Entries, en)
	}
	return tl, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// timelineEntry is how one event reads in a timeline.
func timelineEntry(e runtime.Event) entry {
	v := eventview.Describe(e)
	en := entry{Kind: v.Tag, Path: v.Path, What: v.What, Outcome: v.Outcome, Duration: v.DurationMS, Failed: v.Failed}
	en.Text = strings.TrimSpace(v.Why + "\n" + v.Exchange)
	if len(en.Text) > maxEntryText {
		en.Text = en.Text[:maxEntryText] + fmt.Sprintf("… (%d more bytes: run %s records all of it)", len(en.Text)-maxEntryText, e.Run)
	}
	return en
}
