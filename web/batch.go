package web

import (
	"context"
	"net/http"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/store"
)

type batchesData struct {
	page
	Rows []*batch.Summary
}

func (s *Server) batchSummaries(ctx context.Context) ([]*batch.Summary, error) {
	bs, err := s.st.Batches(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*batch.Summary, 0, len(bs))
	for _, b := range bs {
		sum, err := batch.Summarize(ctx, s.st, b)
		if err != nil {
			return nil, err
		}
		out = append(out, sum)
	}
	return out, nil
}

func (s *Server) batchesPage(w http.ResponseWriter, r *http.Request) {
	rows, err := s.batchSummaries(r.Context())
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	s.render(w, http.StatusOK, "batches", batchesData{page: s.page(r, "Batches", "batches"), Rows: rows})
}

func (s *Server) batchesLive(w http.ResponseWriter, r *http.Request) {
	s.liveRows(w, r, "batches", "batchrows", func(ctx context.Context) (any, error) { return s.batchSummaries(ctx) })
}

type batchData struct {
	page
	S      *batch.Summary
	Others []*store.Batch
}

func (s *Server) batchPage(w http.ResponseWriter, r *http.Request) {
	b, err := s.st.FindBatch(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, http.StatusNotFound, err)
		return
	}
	sum, err := batch.Summarize(r.Context(), s.st, b)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	d := batchData{page: s.page(r, "Batch "+b.ID, "batches"), S: sum}
	if all, err := s.st.Batches(r.Context()); err == nil {
		for _, o := range all {
			if o.ID != b.ID {
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
	s.liveRows(w, r, "batch", "batchbody", func(ctx context.Context) (any, error) {
		cur, err := s.st.Batch(ctx, b.ID)
		if err != nil {
			return nil, err
		}
		return batch.Summarize(ctx, s.st, cur)
	})
}

type compareData struct {
	page
	C *batch.Comparison
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
	c, err := batch.Compare(r.Context(), s.st, a, b)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	s.render(w, http.StatusOK, "compare", compareData{page: s.page(r, "Compare", "batches"), C: c})
}

// report serves a batch's self-contained HTML report (with against, its
// comparison too): inline styles and no script, so its own CSP allows
// inline styles only.
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
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := batch.WriteReport(r.Context(), s.st, w, b, against); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}
