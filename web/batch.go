package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/store"
)

type batchesData struct {
	page
	Rows  []*batch.Summary
	Shown string // the rows' digest, for the live URL
}

func (s *Server) batchSummaries(ctx context.Context) ([]*batch.Summary, error) {
	bs, err := s.st.Batches(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*batch.Summary, 0, len(bs))
	for _, b := range bs {
		sum, err := s.summarize(ctx, b)
		if err != nil {
			return nil, err
		}
		out = append(out, sum)
	}
	return out, nil
}

// summarize is b's summary with its pipeline named as the run pages name
// one, relative to the served directory, not as typed where the batch
// was started.
func (s *Server) summarize(ctx context.Context, b *store.Batch) (*batch.Summary, error) {
	sum, err := batch.Summarize(ctx, s.st, b)
	if err == nil && b.PipelineAbs != "" {
		sum.Pipeline = s.shown(b.PipelineAbs)
	}
	return sum, err
}

func (s *Server) batchesPage(w http.ResponseWriter, r *http.Request) {
	rows, err := s.batchSummaries(r.Context())
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	s.render(w, http.StatusOK, "batches", batchesData{page: s.page(r, "Batches", "batches"), Rows: rows,
		Shown: s.shownDigest("batches", "batchrows", rows)})
}

func (s *Server) batchesLive(w http.ResponseWriter, r *http.Request) {
	s.liveRows(w, r, "batches", "batchrows", func(ctx context.Context) (any, error) { return s.batchSummaries(ctx) })
}

type batchData struct {
	page
	BatchView
	// Others are the batches to compare with, the batch before this one
	// of its pipeline and dataset (Previous) first: the one preselected.
	Others   []*store.Batch
	Previous *store.Batch
	Shown    string // the batch body's digest, for the live URL
}

// BatchView is a batch's live part: its summary and the items its
// filters keep, each with its details and a rating form.
type BatchView struct {
	S     *batch.Summary
	Rows  []batch.Row
	F     batch.Filter
	More  int    // items the filters keep that are not shown
	Query string // the filters, for the live URL
	Token string // the CSRF token of the rating forms
}

// filterOf reads a view's filters from its query.
func filterOf(r *http.Request) batch.Filter {
	q := r.URL.Query()
	return batch.Filter{Show: q.Get("show"), Metric: q.Get("metric"), Class: q.Get("class"), Text: q.Get("q")}
}

// filterQuery is f as a query, without the filters left empty.
func filterQuery(f batch.Filter) string {
	q := url.Values{}
	for name, v := range map[string]string{"show": f.Show, "metric": f.Metric, "class": f.Class, "q": f.Text} {
		if v != "" {
			q.Set(name, v)
		}
	}
	return q.Encode()
}

func (s *Server) batchViewOf(ctx context.Context, id string, f batch.Filter, query string) (BatchView, error) {
	b, err := s.st.Batch(ctx, id)
	if err != nil {
		return BatchView{}, err
	}
	sum, err := s.summarize(ctx, b)
	if err != nil {
		return BatchView{}, err
	}
	// A search reads every item's run; other filters need only the
	// summary, and then only the rows shown are read.
	if f.Text != "" {
		if err := sum.ReadDetails(ctx, s.st); err != nil {
			return BatchView{}, err
		}
	}
	v := BatchView{S: sum, Rows: f.Rows(sum), F: f, Query: query, Token: s.csrf}
	if len(v.Rows) > maxItemRows {
		v.Rows, v.More = v.Rows[:maxItemRows], len(v.Rows)-maxItemRows
	}
	if f.Text == "" {
		if err := sum.ReadRowDetails(ctx, s.st, v.Rows); err != nil {
			return BatchView{}, err
		}
	}
	return v, nil
}

// maxItemRows bounds the items a batch page shows with their details:
// the filters reach the others.
const maxItemRows = 300

func (s *Server) batchPage(w http.ResponseWriter, r *http.Request) {
	b, err := s.st.FindBatch(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, http.StatusNotFound, err)
		return
	}
	f := filterOf(r)
	v, err := s.batchViewOf(r.Context(), b.ID, f, filterQuery(f))
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	d := batchData{page: s.page(r, "Batch "+b.ID, "batches"), BatchView: v, Shown: s.shownDigest("batch", "batchbody", v)}
	if d.Previous, err = batch.Previous(r.Context(), s.st, b); err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	if d.Previous != nil {
		d.Others = append(d.Others, d.Previous)
	}
	if all, err := s.st.Batches(r.Context()); err == nil {
		for _, o := range all {
			if o.ID != b.ID && (d.Previous == nil || o.ID != d.Previous.ID) {
				d.Others = append(d.Others, o)
			}
		}
	}
	s.render(w, http.StatusOK, "batch", d)
}

func (s *Server) batchLive(w http.ResponseWriter, r *http.Request) {
	b, err := s.st.FindBatch(r.Context(), r.PathValue("id"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	f := filterOf(r)
	s.liveRows(w, r, "batch", "batchbody", func(ctx context.Context) (any, error) {
		return s.batchViewOf(ctx, b.ID, f, filterQuery(f))
	})
}

// rate records a person's verdict on one item of a batch: the metric
// human.
func (s *Server) rate(w http.ResponseWriter, r *http.Request) {
	b, err := s.st.FindBatch(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, http.StatusNotFound, err)
		return
	}
	key := r.FormValue("key")
	back := "/batches/" + b.ID
	if q := r.FormValue("query"); q != "" {
		back += "?" + q
	}
	verdict := r.FormValue("verdict")
	if verdict != "pass" && verdict != "fail" {
		s.back(w, r, back, fmt.Errorf("rating item %s: choose pass or fail", key))
		return
	}
	err = s.st.Rate(r.Context(), &store.Rating{Batch: b.ID, Key: key, Pass: verdict == "pass", Note: strings.TrimSpace(r.FormValue("note"))})
	s.back(w, r, back, err)
}

type compareData struct {
	page
	C             *batch.Comparison
	Fixed, Broken []batch.Pair // those the filters keep
	F             batch.Filter
}

func (s *Server) comparePage(w http.ResponseWriter, r *http.Request) {
	a, err := s.st.FindBatch(r.Context(), r.URL.Query().Get("a"))
	if err != nil {
		s.fail(w, r, http.StatusNotFound, err)
		return
	}
	b, err := s.st.FindBatch(r.Context(), r.URL.Query().Get("b"))
	if err != nil {
		s.fail(w, r, http.StatusNotFound, err)
		return
	}
	c, err := batch.CompareBatches(r.Context(), s.st, a, b)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	f := filterOf(r)
	d := compareData{page: s.page(r, "Compare", "batches"), C: c, F: f, Fixed: f.Pairs(c.Fixed), Broken: f.Pairs(c.Broken)}
	s.render(w, http.StatusOK, "compare", d)
}

// report serves a batch's self-contained HTML report (with against, its
// comparison too): inline styles and its own script, which its CSP
// allows by hash.
func (s *Server) report(w http.ResponseWriter, r *http.Request) {
	b, err := s.st.FindBatch(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, http.StatusNotFound, err)
		return
	}
	var against *store.Batch
	if a := r.URL.Query().Get("against"); a != "" {
		if against, err = s.st.FindBatch(r.Context(), a); err != nil {
			s.fail(w, r, http.StatusNotFound, err)
			return
		}
	}
	w.Header().Set("Content-Security-Policy", batch.ReportCSP)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := batch.WriteReport(r.Context(), s.st, w, b, against); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}
