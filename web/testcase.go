package web

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/flowtest"
)

// testCase downloads a finished run as a test case that replays it
// offline (every model and tool call mocked at its path, its route,
// status and outputs expected): "make this a test", for a run page or a
// batch item. The file is meant to sit beside the pipeline.
func (s *Server) testCase(w http.ResponseWriter, r *http.Request) {
	run, err := s.st.FindRun(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, http.StatusNotFound, err)
		return
	}
	name := strings.TrimSuffix(filepath.Base(run.PipelineAbs), filepath.Ext(run.PipelineAbs))
	beside := filepath.Join(filepath.Dir(run.PipelineAbs), name+".test.yaml")
	_, b, err := flowtest.FromStoredRun(r.Context(), s.st, run.ID, beside, batch.ExpectedOfRun(s.st))
	if err != nil {
		s.fail(w, r, http.StatusConflict, err)
		return
	}
	w.Header().Set("Content-Type", "application/yaml; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.%s.test.yaml"`, name, run.ID))
	fmt.Fprintf(w, "# Made from run %s: replays that run offline. Save it beside %s.\n", run.ID, filepath.Base(run.PipelineAbs))
	_, _ = w.Write(b)
}
