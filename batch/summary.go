package batch

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// Wilson z for a 95% interval.
const z95 = 1.959963984540054

// Rate is a proportion with its 95% Wilson score interval.
type Rate struct {
	Passed int     `json:"passed"`
	N      int     `json:"n"`
	Rate   float64 `json:"rate"`
	Low    float64 `json:"low"`
	High   float64 `json:"high"`
}

// Wilson is k successes out of n with the 95% Wilson score interval. With
// no trials the interval is the whole of [0, 1].
func Wilson(k, n int) Rate {
	if n <= 0 {
		return Rate{Passed: k, N: n, High: 1}
	}
	p := float64(k) / float64(n)
	nf := float64(n)
	z2 := z95 * z95
	denom := 1 + z2/nf
	center := (p + z2/(2*nf)) / denom
	half := z95 * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf)) / denom
	return Rate{Passed: k, N: n, Rate: p, Low: math.Max(0, center-half), High: math.Min(1, center+half)}
}

// Metric is one score aggregated over a batch: a boolean as a rate over
// all items, a number as a mean over the items that have it.
type Metric struct {
	Name    string  `json:"name"`
	Kind    string  `json:"kind"` // "rate", "mean" or "other"
	Primary bool    `json:"primary,omitempty"`
	Rate    *Rate   `json:"rate,omitempty"`
	Mean    float64 `json:"mean,omitempty"`
	N       int     `json:"n"` // items with a value
}

// Counts are a batch's items by status.
type Counts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Stopped   int `json:"stopped"`
	Waiting   int `json:"waiting"`
	Running   int `json:"running"`
	// Interrupted items were running when their batch's process died;
	// flowrun batch resume runs them on.
	Interrupted int `json:"interrupted"`
	Pending     int `json:"pending"`
	// Unscored items completed but none of their checks could be
	// checked (see ClassUnscored): they count as not passed.
	Unscored int `json:"unscored"`
}

// Done is how many items have a result.
func (c Counts) Done() int { return c.Completed + c.Failed + c.Stopped + c.Waiting }

// Unsettled is how many items have neither completed nor failed: those
// stopped, waiting, running or pending.
func (c Counts) Unsettled() int { return c.Total - c.Completed - c.Failed }

// FailureClass is the items that failed or stopped with one error class.
type FailureClass struct {
	Class string   `json:"class"`
	Count int      `json:"count"`
	Keys  []string `json:"keys"`  // the first few
	Error string   `json:"error"` // the first item's
}

// Row is one item as the per-item table shows it.
type Row struct {
	Index      int            `json:"index"`
	Key        string         `json:"key"`
	Repeat     int            `json:"repeat,omitempty"` // which of the item's runs (--repeat), from 0
	Status     runtime.Status `json:"status"`
	Pass       *bool          `json:"pass,omitempty"` // the primary metric; nil when there is none
	Scores     map[string]any `json:"scores,omitempty"`
	CostUSD    float64        `json:"cost_usd"`
	Tokens     int            `json:"tokens"`
	DurationMS float64        `json:"duration_ms"`
	Run        string         `json:"run,omitempty"`
	Class      string         `json:"class,omitempty"`
	Error      string         `json:"error,omitempty"`
	// Why the item scored as it did: what its run took and gave, the
	// dataset fields the metrics read, the judge's reasoning, and the
	// note of whoever rated it (its human score is in Scores). Inputs and
	// Outputs are read by Summary.ReadDetails.
	Inputs    map[string]any    `json:"inputs,omitempty"`
	Expected  map[string]any    `json:"expected,omitempty"`
	Outputs   map[string]any    `json:"outputs,omitempty"`
	Reasoning map[string]string `json:"reasoning,omitempty"`
	// Checks are the checks of its metrics that are lists of checks.
	Checks map[string]store.Checks `json:"checks,omitempty"`
	Note   string                  `json:"note,omitempty"`
	// Flaky marks an item run more than once whose runs disagree.
	Flaky bool `json:"flaky,omitempty"`
	// Name is how views name the row: its key, with the run's number
	// when items ran several times (see RunName).
	Name string `json:"-"`
}

// Summary is what a batch gave, as `flowrun batch show` prints it.
type Summary struct {
	ID          string         `json:"id"`
	Pipeline    string         `json:"pipeline"`
	Name        string         `json:"name"`
	Dataset     string         `json:"dataset"`
	Label       string         `json:"label,omitempty"`
	Description string         `json:"description,omitempty"`
	Status      runtime.Status `json:"status"`
	Reason      string         `json:"reason,omitempty"`
	Started     time.Time      `json:"started"`
	Finished    *time.Time     `json:"finished,omitempty"`
	Items       Counts         `json:"items"`
	Primary     string         `json:"primary,omitempty"`
	PassRate    *Rate          `json:"pass_rate,omitempty"`
	Metrics     []Metric       `json:"metrics"`
	CostUSD     float64        `json:"cost_usd"`
	CostPerItem float64        `json:"cost_per_item_usd"` // mean over the items that ran
	Tokens      int            `json:"tokens"`
	P50MS       float64        `json:"latency_p50_ms"`
	P95MS       float64        `json:"latency_p95_ms"`
	Failures    []FailureClass `json:"failures"`
	Slowest     []Row          `json:"slowest"`
	Costliest   []Row          `json:"most_expensive"`
	Rows        []Row          `json:"rows"`
	// Repeats, for a batch that ran each item several times (--repeat),
	// say per item how its runs went; Items and the rates above then
	// count runs.
	Repeats *RepeatSummary `json:"repeats,omitempty"`
	// Agreement is the human ratings against each pass/fail metric.
	Agreement []Agreement `json:"agreement,omitempty"`
	// Repeated says some item ran more than once (see Row.Flaky).
	Repeated bool `json:"repeated,omitempty"`

	expectedGuessed bool                         // the batch did not record the fields its metrics read
	expects         map[string][]dsl.Expectation // Settings.Expects
}

// RunName is how a view names one run of an item: its key, and when
// each item ran several times (--repeat), the run's number from 1 (t26#2).
func RunName(key string, repeat int, repeated bool) string {
	if !repeated {
		return key
	}
	return fmt.Sprintf("%s#%d", key, repeat+1)
}

// Unit is what the summary's counts and rates count: "runs" when items
// ran several times, else "items".
func (s *Summary) Unit() string {
	if s.Repeated {
		return "runs"
	}
	return "items"
}

// ItemsRun is how many dataset items the rows are runs of.
func (s *Summary) ItemsRun() int {
	keys := map[string]bool{}
	for _, r := range s.Rows {
		keys[r.Key] = true
	}
	return len(keys)
}

// Summarize reads a batch's items and computes its summary. It, Compare
// and WriteReport only read the store: every figure comes from the
// batch's item records, so two readings of one batch agree. Pass rates
// count the items that finished, an item that finished without
// completing as not passed; a stopped batch's pending items are not
// counted (Items says how many finished of how many).
func Summarize(ctx context.Context, st *store.Store, b *store.Batch) (*Summary, error) {
	items, err := st.BatchItems(ctx, b.ID)
	if err != nil {
		return nil, fmt.Errorf("batch %s: reading its items: %w", b.ID, err)
	}
	ratings, err := st.Ratings(ctx, b.ID)
	if err != nil {
		return nil, err
	}
	return summarize(b, items, ratings), nil
}

// SummarizeItems is Summarize for items already read, without ratings.
func SummarizeItems(b *store.Batch, items []*store.BatchItem) *Summary {
	return summarize(b, items, nil)
}

func summarize(b *store.Batch, items []*store.BatchItem, ratings map[string]*store.Rating) *Summary {
	items = withRatings(items, ratings)
	s := &Summary{ID: b.ID, Pipeline: b.Pipeline, Name: b.PipelineName, Dataset: b.Dataset,
		Label: b.Label, Description: b.Description, Status: b.Status, Reason: b.Reason,
		Started: b.Started, Metrics: []Metric{}, Failures: []FailureClass{}, Rows: make([]Row, 0, len(items))}
	if !b.Finished.IsZero() {
		f := b.Finished
		s.Finished = &f
	}
	names, primary := metricNames(b, items)
	names = metricsWithHuman(names, ratings)
	s.Primary = primary
	settings, _ := SettingsOf(b)
	s.expectedGuessed, s.expects = settings.Expected == nil, settings.Expects
	var durations []float64
	ran := 0
	failures := map[string]*FailureClass{}
	for _, it := range items {
		s.Items.Total++
		switch it.Status {
		case runtime.StatusCompleted:
			s.Items.Completed++
		case runtime.StatusFailed:
			s.Items.Failed++
		case runtime.StatusStopped:
			s.Items.Stopped++
		case runtime.StatusWaiting:
			s.Items.Waiting++
		case runtime.StatusRunning:
			s.Items.Running++
		case runtime.StatusInterrupted:
			s.Items.Interrupted++
		default:
			s.Items.Pending++
		}
		if it.Run != "" {
			ran++
		}
		s.CostUSD += it.CostUSD
		s.Tokens += it.Tokens
		if finished(it.Status) {
			durations = append(durations, it.DurationMS)
		}
		if it.Class == ClassUnscored {
			s.Items.Unscored++
		}
		if it.Status == runtime.StatusFailed || it.Status == runtime.StatusStopped || it.Class == ClassUnscored {
			class := it.Class
			if class == "" {
				class = string(it.Status)
			}
			f := failures[class]
			if f == nil {
				f = &FailureClass{Class: class, Error: it.Error}
				failures[class] = f
			}
			f.Count++
			if len(f.Keys) < 5 {
				f.Keys = append(f.Keys, it.Key)
			}
		}
		r := row(it, primary)
		r.Expected = expected(it.Item, settings.Expected)
		if rating := ratings[it.Key]; rating != nil {
			r.Note = rating.Note
		}
		s.Rows = append(s.Rows, r)
	}
	s.Repeated = markFlaky(s.Rows)
	for i := range s.Rows {
		s.Rows[i].Name = RunName(s.Rows[i].Key, s.Rows[i].Repeat, s.Repeated)
	}
	s.CostUSD = figures.RoundUSD(s.CostUSD)
	if ran > 0 {
		s.CostPerItem = figures.RoundUSD(s.CostUSD / float64(ran))
	}
	slices.Sort(durations)
	s.P50MS, s.P95MS = Percentile(durations, 50), Percentile(durations, 95)
	for _, name := range names {
		m := aggregate(name, items)
		m.Primary = name == primary
		if m.Primary {
			s.PassRate = m.Rate
		}
		s.Metrics = append(s.Metrics, m)
	}
	s.Agreement = agreements(s, items)
	for _, f := range failures {
		s.Failures = append(s.Failures, *f)
	}
	sort.Slice(s.Failures, func(i, j int) bool {
		a, b := s.Failures[i], s.Failures[j]
		return a.Count > b.Count || a.Count == b.Count && a.Class < b.Class
	})
	s.Repeats = repeats(s.Rows)
	s.Slowest = top(s.Rows, func(r Row) float64 { return r.DurationMS })
	s.Costliest = top(s.Rows, func(r Row) float64 { return r.CostUSD })
	return s
}

// repeats summarizes the items' runs when some item ran more than once;
// nil otherwise.
func repeats(rows []Row) *RepeatSummary {
	keys, runs := byKey(rows)
	if len(keys) == len(rows) {
		return nil
	}
	items := make([]Repeats, 0, len(keys))
	for _, k := range keys {
		it := Repeats{Key: k}
		for _, r := range runs[k] {
			if finished(r.Status) {
				it.Runs = append(it.Runs, RepeatRun{Run: r.Run, Pass: rowPassed(r), Scores: r.Scores})
			}
		}
		items = append(items, it)
	}
	s := SummarizeRepeats(items)
	return &s
}

func finishedCount(items []*store.BatchItem) int {
	n := 0
	for _, it := range items {
		if finished(it.Status) {
			n++
		}
	}
	return n
}

// finished says whether an item's run has ended (for now: a waiting run
// has ended its attempt).
func finished(status runtime.Status) bool {
	switch status {
	case runtime.StatusCompleted, runtime.StatusFailed, runtime.StatusStopped, runtime.StatusWaiting:
		return true
	}
	return false
}

func row(it *store.BatchItem, primary string) Row {
	r := Row{Index: it.Index, Key: it.Key, Repeat: it.Repeat, Status: it.Status, Scores: it.Scores, CostUSD: it.CostUSD, Tokens: it.Tokens,
		DurationMS: it.DurationMS, Run: it.Run, Class: it.Class, Error: it.Error, Reasoning: it.Reasoning, Checks: it.Checks}
	if primary != "" {
		p := passed(it, primary)
		r.Pass = &p
	}
	return r
}

// passed says whether an item passed the primary metric: its run
// completed and the metric is true.
func passed(it *store.BatchItem, primary string) bool {
	return it.Status == runtime.StatusCompleted && it.Scores[primary] == true
}

// metricNames are the batch's metrics in declaration order and its
// primary one, from its settings; a batch recorded without them (or with
// settings that no longer decode: the summary is still worth showing)
// gets its items' score names in sorted order and the conventional
// primary.
func metricNames(b *store.Batch, items []*store.BatchItem) ([]string, string) {
	settings, _ := SettingsOf(b)
	names := settings.Metrics
	if names == nil {
		seen := map[string]bool{}
		for _, it := range items {
			for n := range it.Scores {
				if !seen[n] {
					seen[n] = true
					names = append(names, n)
				}
			}
		}
		slices.Sort(names)
	}
	if settings.Primary != "" {
		return names, settings.Primary
	}
	if slices.Contains(names, "pass") {
		return names, "pass"
	}
	for _, n := range names {
		if metricKind(n, items) == "rate" {
			return names, n
		}
	}
	return names, ""
}

// metricKind says how a metric aggregates: "rate" when every value it
// has is a boolean, "mean" when every one is a number, else "other".
func metricKind(name string, items []*store.BatchItem) string {
	kind := ""
	for _, it := range items {
		v, ok := it.Scores[name]
		if !ok || v == nil {
			continue
		}
		k := "other"
		if _, isBool := v.(bool); isBool {
			k = "rate"
		} else if _, isNum := jsonvalue.Number(v); isNum {
			k = "mean"
		}
		if kind != "" && kind != k {
			return "other"
		}
		kind = k
	}
	if kind == "" {
		return "rate" // no values yet: every item so far counts as not passed
	}
	return kind
}

func aggregate(name string, items []*store.BatchItem) Metric {
	m := Metric{Name: name, Kind: metricKind(name, items)}
	var sum float64
	k := 0
	for _, it := range items {
		v, ok := it.Scores[name]
		if !ok || v == nil {
			continue
		}
		m.N++
		switch m.Kind {
		case "rate":
			// A person may pass an item whose run did not complete.
			if v == true && (it.Status == runtime.StatusCompleted || name == HumanMetric) {
				k++
			}
		case "mean":
			f, _ := jsonvalue.Number(v)
			sum += f
		}
	}
	switch m.Kind {
	case "rate":
		n := finishedCount(items)
		if name == HumanMetric {
			n = m.N
		}
		r := Wilson(k, n)
		m.Rate = &r
	case "mean":
		if m.N > 0 {
			m.Mean = sum / float64(m.N)
		}
	}
	return m
}

// Percentile is the p-th percentile of sorted values, interpolating
// linearly between the closest ranks (0 for no values).
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	pos := p / 100 * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	if lo >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	return sorted[lo] + (pos-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// top is the five rows with the largest positive value, largest first,
// in dataset order among equals.
func top(rows []Row, value func(Row) float64) []Row {
	var out []Row
	for _, r := range rows {
		if value(r) > 0 {
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return value(out[i]) > value(out[j]) })
	// An item run several times is listed once, by its run that is
	// highest, so that one item does not fill the list.
	seen := map[string]bool{}
	out = slices.DeleteFunc(out, func(r Row) bool {
		dup := seen[r.Key]
		seen[r.Key] = true
		return dup
	})
	if len(out) > 5 {
		out = out[:5]
	}
	if out == nil {
		out = []Row{}
	}
	return out
}
