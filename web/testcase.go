package web

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/flowrun/flowrun/durable"
	"github.com/flowrun/flowrun/flowtest"
	"github.com/flowrun/flowrun/runtime"
)

// testCase downloads a finished run as a test case that replays it
// offline (every model and tool call mocked at its path, its route,
// status and outputs expected): "make this a test", for a run page or a
// batch item. The file is meant to sit beside the pipeline.
func (s *Server) testCase(w http.ResponseWriter, r *http.Request) {
	run, events, err := s.st.RunWithEvents(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, http.StatusNotFound, err)
		return
	}
	if run.Status == runtime.StatusRunning {
		s.fail(w, r, http.StatusConflict, fmt.Errorf("run %s is still running: a test case is made from a finished run", run.ID))
		return
	}
	p, ds := durable.Recorded(run)
	if p == nil {
		s.fail(w, r, http.StatusConflict, fmt.Errorf("run %s's pipeline does not load: %s", run.ID, ds))
		return
	}
	name := strings.TrimSuffix(filepath.Base(run.PipelineAbs), filepath.Ext(run.PipelineAbs))
	beside := filepath.Join(filepath.Dir(run.PipelineAbs), name+".test.yaml")
	b, err := flowtest.FromRun(flowtest.RecordedRun{ID: run.ID, Pipeline: p, PipelinePath: flowtest.RelativePipeline(run.PipelineAbs, beside),
		Inputs: run.Inputs, Events: events})
	if err != nil {
		s.fail(w, r, http.StatusConflict, fmt.Errorf("run %s: %w", run.ID, err))
		return
	}
	w.Header().Set("Content-Type", "application/yaml; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.%s.test.yaml"`, name, run.ID))
	fmt.Fprintf(w, "# Made from run %s: replays that run offline. Save it beside %s.\n", run.ID, filepath.Base(run.PipelineAbs))
	_, _ = w.Write(b)
}
