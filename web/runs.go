package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// runRow is one line of the runs list.
type runRow struct {
	ID, Pipeline, Name, ParentRun string
	Status                        runtime.Status
	ParentSeq                     int64
	Started                       time.Time
	Duration                      time.Duration
	CostUSD                       float64
	Tokens                        int64
}

// listRows are the lines of the runs list: the queued launches that
// failed to start, those waiting for a slot, then the runs.
type listRows struct {
	Failed []queuedRun
	Queued []queuedRun
	Runs   []runRow
}

func (s *Server) listRows(runs []runRow) listRows {
	return listRows{Failed: s.launchFailures(), Queued: s.queued(), Runs: runs}
}

// listQuery is the runs list's filter and order, from the URL.
type listQuery struct {
	Pipeline, Sort string
	Status         runtime.Status
	Desc           bool
}

func readListQuery(r *http.Request) listQuery {
	q := r.URL.Query()
	l := listQuery{Pipeline: q.Get("pipeline"), Status: runtime.Status(q.Get("status")), Sort: q.Get("sort"), Desc: q.Get("order") != "asc"}
	if !slices.Contains([]string{"start", "duration", "cost", "tokens"}, l.Sort) {
		l.Sort = "start"
	}
	return l
}

// rows lists the runs the query selects, in its order. Runs in progress
// get their cost and tokens so far from their recorded model turns.
func (s *Server) rows(ctx context.Context, l listQuery) ([]runRow, []string, error) {
	runs, err := s.st.Runs(ctx)
	if err != nil {
		return nil, nil, err
	}
	var pipelines []string
	var out []runRow
	for _, r := range runs {
		if !slices.Contains(pipelines, r.PipelineName) {
			pipelines = append(pipelines, r.PipelineName)
		}
		if (l.Pipeline != "" && r.PipelineName != l.Pipeline) || (l.Status != "" && r.Status != l.Status) {
			continue
		}
		row := runRow{ID: r.ID, Pipeline: r.Pipeline, Name: r.PipelineName, Status: r.Status, ParentRun: r.ParentRun,
			ParentSeq: r.ParentSeq, Started: r.Started, Duration: runDuration(r), CostUSD: r.CostUSD, Tokens: int64(r.Tokens)}
		if r.Status == runtime.StatusRunning {
			if c, t, err := s.st.SpentSoFar(ctx, r.ID); err == nil {
				row.CostUSD, row.Tokens = c, t
			}
		}
		out = append(out, row)
	}
	slices.Sort(pipelines)
	key := func(r runRow) float64 {
		switch l.Sort {
		case "duration":
			return float64(r.Duration)
		case "cost":
			return r.CostUSD
		case "tokens":
			return float64(r.Tokens)
		}
		return float64(r.Started.UnixNano())
	}
	slices.SortStableFunc(out, func(a, b runRow) int {
		x, y := key(a), key(b)
		if l.Desc {
			x, y = y, x
		}
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	return out, pipelines, nil
}

func runDuration(r *store.Run) time.Duration {
	end := r.Finished
	if end.IsZero() {
		end = r.Updated
		if r.Status == runtime.StatusRunning {
			end = time.Now()
		}
	}
	return end.Sub(r.Started).Round(time.Millisecond)
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
	rows, pipelines, err := s.rows(r.Context(), l)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	s.render(w, http.StatusOK, "runs", runsData{page: s.page(r, "Runs", "runs"), Query: l, Pipelines: pipelines,
		Statuses: runtime.Statuses(), Rows: s.listRows(rows), LiveURL: "/live/runs?" + r.URL.RawQuery})
}

// runsLive streams the runs list's rows, rendered, whenever they change.
func (s *Server) runsLive(w http.ResponseWriter, r *http.Request) {
	l := readListQuery(r)
	s.liveRows(w, r, "runs", "runrows", func(ctx context.Context) (any, error) {
		rows, _, err := s.rows(ctx, l)
		return s.listRows(rows), err
	})
}

// liveRows streams the template part of page rendered with what data
// returns, each time the store changes and it renders differently (and
// at least every second: durations of runs in progress grow).
func (s *Server) liveRows(w http.ResponseWriter, r *http.Request, page, part string, data func(context.Context) (any, error)) {
	f, ok := sse(w)
	if !ok {
		return
	}
	var last []byte
	for {
		wake := s.change.wait()
		d, err := data(r.Context())
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := s.pages[page].ExecuteTemplate(&b, part, d); err != nil {
			return
		}
		if !bytes.Equal(b.Bytes(), last) {
			last = b.Bytes()
			msg, _ := json.Marshal(b.String())
			if send(w, f, "rows", msg) != nil {
				return
			}
		}
		select {
		case <-wake:
		case <-time.After(time.Second):
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		}
		// A list re-reads every run: at most four times a second, however
		// fast events come.
		select {
		case <-time.After(250 * time.Millisecond):
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		}
	}
}

// sortLink is the runs list URL sorted by key, toggling the order when it
// is already sorted by it.
func (l listQuery) SortLink(key string) string {
	order := "desc"
	if l.Sort == key && l.Desc {
		order = "asc"
	}
	v := []string{"sort=" + key, "order=" + order}
	if l.Pipeline != "" {
		v = append(v, "pipeline="+urlQuery(l.Pipeline))
	}
	if l.Status != "" {
		v = append(v, "status="+urlQuery(string(l.Status)))
	}
	return "/?" + strings.Join(v, "&")
}
