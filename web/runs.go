package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// runRow is one line of the runs list: a run, or (Batch set) a batch
// standing for its items.
type runRow struct {
	ID, Pipeline, Name, ParentRun string
	Status                        runtime.Status
	ParentSeq                     int64
	Started                       time.Time
	Ended                         time.Time // zero while it runs
	CostUSD                       float64
	Tokens                        int64
	Batch                         *store.BatchLine
}

// Duration is how long it ran, or has run so far: a live list renders it
// again every second without reading the store.
func (r runRow) Duration() time.Duration {
	end := r.Ended
	if end.IsZero() {
		end = time.Now()
	}
	return end.Sub(r.Started).Round(time.Millisecond)
}

// listRows are the lines of the runs list: the queued launches that
// failed to start, those waiting for a slot, then one page of the runs.
type listRows struct {
	Failed []queuedRun
	Queued []queuedRun
	Runs   []runRow
	Query  listQuery
	Total  int
}

// pageSize is how many lines a page of the runs list shows.
const pageSize = 50

// listQuery is the runs list's filters, order and page, from the URL.
type listQuery struct {
	Pipeline, Sort, Batch, ID, Text string
	After, Before                   string // as a datetime-local input gives them, in the server's time zone
	Status                          runtime.Status
	Desc                            bool
	Page                            int // from 1
	Err                             string
}

// timeInput is the layout of a datetime-local input's value.
const timeInput = "2006-01-02T15:04"

func readListQuery(r *http.Request) listQuery {
	q := r.URL.Query()
	l := listQuery{Pipeline: q.Get("pipeline"), Status: runtime.Status(q.Get("status")), Sort: q.Get("sort"), Desc: q.Get("order") != "asc",
		Batch: strings.TrimSpace(q.Get("batch")), ID: strings.TrimSpace(q.Get("id")), Text: strings.TrimSpace(q.Get("text")),
		After: q.Get("after"), Before: q.Get("before")}
	if !slices.Contains([]string{"start", "duration", "cost", "tokens"}, l.Sort) {
		l.Sort = "start"
	}
	l.Page, _ = strconv.Atoi(q.Get("page"))
	l.Page = max(1, l.Page)
	return l
}

// store is the query for the store, or an error naming a time it
// cannot read.
func (l listQuery) store() (store.RunQuery, error) {
	q := store.RunQuery{Pipeline: l.Pipeline, Status: l.Status, Batch: l.Batch, IDPrefix: l.ID, Text: l.Text,
		Limit: pageSize, Offset: (l.Page - 1) * pageSize}
	for _, t := range []struct {
		name, v string
		to      *time.Time
	}{{"started after", l.After, &q.After}, {"started before", l.Before, &q.Before}} {
		if t.v == "" {
			continue
		}
		v, err := time.ParseInLocation(timeInput, t.v, time.Local)
		if err != nil {
			return q, fmt.Errorf("%s: %q is not a date and time such as 2026-01-31T09:30", t.name, t.v)
		}
		*t.to = v
	}
	return q, nil
}

// rows reads the page of the runs list the query selects, in its order.
// Runs in progress get their cost and tokens so far from their recorded
// model turns.
func (s *Server) rows(ctx context.Context, l listQuery) (listRows, error) {
	out := s.listRows(l)
	q, err := l.store()
	if err != nil {
		out.Query.Err = err.Error()
		return out, nil
	}
	lines, total, err := s.st.RunList(ctx, q, store.ListOrder{By: l.Sort, Asc: !l.Desc})
	if err != nil {
		return out, err
	}
	out.Total = total
	for _, line := range lines {
		if b := line.Batch; b != nil {
			out.Runs = append(out.Runs, runRow{ID: b.ID, Pipeline: s.shown(b.Pipeline), Name: b.PipelineName, Status: b.Status, Started: b.Started,
				Ended: ended(b.Status, b.Finished, b.Updated), CostUSD: b.CostUSD, Tokens: int64(b.Tokens), Batch: b})
			continue
		}
		r := line.Run
		row := runRow{ID: r.ID, Pipeline: s.shown(r.Pipeline), Name: r.PipelineName, Status: r.Status, ParentRun: r.ParentRun,
			ParentSeq: r.ParentSeq, Started: r.Started, Ended: ended(r.Status, r.Finished, r.Updated), CostUSD: r.CostUSD, Tokens: int64(r.Tokens)}
		if r.Status == runtime.StatusRunning {
			if c, t, err := s.st.SpentSoFar(ctx, r.ID); err == nil {
				row.CostUSD, row.Tokens = c, t
			}
		}
		out.Runs = append(out.Runs, row)
	}
	return out, nil
}

func (s *Server) listRows(l listQuery) listRows {
	return listRows{Failed: s.launchFailures(), Queued: s.queued(), Query: l}
}

// ended is when a run or batch ended: zero while it runs, else when it
// finished or was last heard of.
func ended(status runtime.Status, finished, updated time.Time) time.Time {
	switch {
	case status == runtime.StatusRunning:
		return time.Time{}
	case finished.IsZero():
		return updated
	}
	return finished
}

func runDuration(r *store.Run) time.Duration {
	return runRow{Started: r.Started, Ended: ended(r.Status, r.Finished, r.Updated)}.Duration()
}

// liveURL is a list's live stream at path, with the page's query and the
// digest of the rows it shows.
func liveURL(path string, q url.Values, shown string) string {
	q.Set("shown", shown)
	return path + "?" + q.Encode()
}

type runsData struct {
	page
	Query     listQuery
	Pipelines []string
	Statuses  []runtime.Status
	Rows      listRows
	LiveURL   string
}

func (s *Server) runsPage(w http.ResponseWriter, r *http.Request) {
	l := readListQuery(r)
	rows, err := s.rows(r.Context(), l)
	if err == nil {
		var pipelines []string
		if pipelines, err = s.st.PipelineNames(r.Context()); err == nil {
			p := s.page(r, "Runs", "runs")
			if p.Error == "" {
				p.Error = rows.Query.Err
			}
			s.render(w, http.StatusOK, "runs", runsData{page: p, Query: l, Pipelines: pipelines,
				Statuses: runtime.Statuses(), Rows: rows, LiveURL: liveURL("/live/runs", r.URL.Query(), s.shownDigest("runs", "runrows", rows))})
			return
		}
	}
	s.fail(w, r, http.StatusInternalServerError, err)
}

// runsLive streams the runs list's page, rendered, whenever it changes.
func (s *Server) runsLive(w http.ResponseWriter, r *http.Request) {
	l := readListQuery(r)
	s.liveRows(w, r, "runs", "runrows", func(ctx context.Context) (any, error) { return s.rows(ctx, l) })
}

// liveRows streams the template part of page rendered with what data
// returns, each time it renders differently. data reads the store again
// only when the store changed (at most four times a second however fast
// events come); in between, the part is rendered again every second
// from what was read, since durations of runs in progress grow.
func (s *Server) liveRows(w http.ResponseWriter, r *http.Request, page, part string, data func(context.Context) (any, error)) {
	f, ok := sse(w)
	if !ok {
		return
	}
	// What the page was rendered with (its digest in ?shown=) is not sent
	// again: replacing a list with itself on connect would drop the node a
	// person (or a test) is about to click.
	last := r.URL.Query().Get("shown")
	var d any
	var wake <-chan struct{}
	changed := true
	for {
		if changed {
			// Waiting starts before the read, so that no change is missed.
			wake = s.change.wait()
			var err error
			if d, err = data(r.Context()); err != nil {
				return
			}
		}
		var b bytes.Buffer
		if err := s.pages[page].ExecuteTemplate(&b, part, d); err != nil {
			return
		}
		if sum := digest(b.Bytes()); sum != last {
			last = sum
			msg, _ := json.Marshal(b.String())
			if send(w, f, "rows", msg) != nil {
				return
			}
		}
		select {
		case <-wake:
			changed = true
		case <-time.After(time.Second):
			changed = false
			continue
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		}
	}
}

// SortLink is the runs list URL sorted by key, toggling the order when it
// is already sorted by it, with the same filters, from the first page.
func (l listQuery) SortLink(key string) string {
	l.Desc = !(l.Sort == key && l.Desc)
	l.Sort, l.Page = key, 1
	return l.link()
}

// PageLink is the runs list URL of page n, with the same filters and order.
func (l listQuery) PageLink(n int) string {
	l.Page = n
	return l.link()
}

// BatchLink is the runs list showing the items of batch id, with the
// same filters ("" for the list with batches folded).
func (l listQuery) BatchLink(id string) string {
	l.Batch, l.Page = id, 1
	return l.link()
}

func (l listQuery) link() string {
	v := url.Values{}
	for k, x := range map[string]string{"pipeline": l.Pipeline, "status": string(l.Status), "batch": l.Batch, "id": l.ID, "text": l.Text,
		"after": l.After, "before": l.Before} {
		if x != "" {
			v.Set(k, x)
		}
	}
	v.Set("sort", l.Sort)
	if !l.Desc {
		v.Set("order", "asc")
	}
	if l.Page > 1 {
		v.Set("page", strconv.Itoa(l.Page))
	}
	return "/?" + v.Encode()
}

// paging is where a page of the runs list is in the list.
type paging struct {
	First, Last, Total, Page, Pages int
	Prev, Next                      string // the links to the pages around, "" at an end
}

// Paging says which lines of how many the page shows, with links to the
// pages before and after it.
func (r listRows) Paging() paging {
	p := paging{Total: r.Total, Page: r.Query.Page, Pages: max(1, (r.Total+pageSize-1)/pageSize)}
	if len(r.Runs) > 0 {
		p.First = (p.Page-1)*pageSize + 1
		p.Last = p.First + len(r.Runs) - 1
	}
	if p.Page > 1 {
		p.Prev = r.Query.PageLink(min(p.Page-1, p.Pages))
	}
	if p.Page < p.Pages {
		p.Next = r.Query.PageLink(p.Page + 1)
	}
	return p
}
