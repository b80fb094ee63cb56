package batch

import (
	"context"
	"fmt"
	"slices"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/runtime"
)

// Scorer computes an item's metrics from its run: the pipeline's score:
// expressions (those given on the command line replace any of the same
// name, or add to them), then the judge pipeline's outputs.
type Scorer struct {
	Metrics []*dsl.Metric
	Judge   *dsl.Pipeline
	// Primary is the metric that says whether an item passed: the one
	// named "pass", else the first boolean one; "" when there is none.
	Primary string
}

// NewScorer is the scorer of p with extra metrics (--score) merged in.
func NewScorer(p *dsl.Pipeline, extra []*dsl.Metric) *Scorer {
	s := &Scorer{}
	if p.Score != nil {
		s.Metrics = append(s.Metrics, p.Score.Metrics...)
		s.Judge = p.Score.Judge
	}
	for _, m := range extra {
		i := slices.IndexFunc(s.Metrics, func(x *dsl.Metric) bool { return x.Name == m.Name })
		if i >= 0 {
			s.Metrics[i] = m
		} else {
			s.Metrics = append(s.Metrics, m)
		}
	}
	types := map[string]*dsl.Type{}
	for _, m := range s.Metrics {
		types[m.Name] = m.Type
	}
	if s.Judge != nil {
		for _, o := range s.Judge.Outputs {
			if !dsl.Reasoning(o) {
				types[o.Name] = o.Type
			}
		}
	}
	names := s.Names()
	switch {
	case types["pass"] != nil:
		s.Primary = "pass"
	default:
		for _, n := range names {
			if t := types[n]; t != nil && t.Kind == dsl.TypeBool {
				s.Primary = n
				break
			}
		}
	}
	return s
}

// Names lists the metrics in declaration order.
func (s *Scorer) Names() []string {
	return (&dsl.Score{Metrics: s.Metrics, Judge: s.Judge}).Names()
}

// judgeRun runs the judge pipeline on its inputs.
type judgeRun func(ctx context.Context, p *dsl.Pipeline, inputs map[string]any) (*runtime.Result, error)

// Scored is what scoring an item gave.
type Scored struct {
	Scores map[string]any
	// Reasoning is the judge's text outputs by name: why it scored the
	// item as it did.
	Reasoning map[string]string
	// The judge's spend, which counts toward the item's.
	CostUSD float64
	Tokens  int
}

// Score computes the metrics of a completed run. A metric that cannot be
// computed is left out and named in the error.
func (s *Scorer) Score(ctx context.Context, env *dsl.ScoreEnv, judge judgeRun) (Scored, error) {
	out := Scored{Scores: map[string]any{}}
	scores := out.Scores
	var errs []error
	for _, m := range s.Metrics {
		if m.Judge != nil {
			c, t, err := judgeMetric(ctx, m, env, judge, &out)
			out.CostUSD, out.Tokens = out.CostUSD+c, out.Tokens+t
			if err != nil {
				errs = append(errs, fmt.Errorf("metric %s: %w", m.Name, err))
			}
			continue
		}
		v, err := m.Eval(env)
		if err == nil {
			err = checkMetric(v)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("metric %s: %w", m.Name, err))
			continue
		}
		scores[m.Name] = v
	}
	if s.Judge != nil {
		in := map[string]any{}
		for _, input := range s.Judge.Inputs {
			switch input.Name {
			case "item":
				in["item"] = env.Item
			case "outputs":
				in["outputs"] = env.Outputs
			case "run":
				in["run"] = map[string]any{"cost_usd": env.Run.CostUSD, "tokens": env.Run.Tokens,
					"duration_ms": env.Run.DurationMS, "status": env.Run.Status}
			}
		}
		res, err := judge(ctx, s.Judge, in)
		if res != nil {
			out.CostUSD, out.Tokens = out.CostUSD+res.CostUSD, out.Tokens+int(res.Tokens)
		}
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("judge %s: %w", s.Judge.Path, err))
		case res.Status != runtime.StatusCompleted:
			errs = append(errs, fmt.Errorf("judge %s: run %s %s: %v%s", s.Judge.Path, res.RunID, res.Status, res.Err, res.Reason))
		default:
			for _, o := range s.Judge.Outputs {
				v := res.Outputs[o.Name]
				if dsl.Reasoning(o) {
					if text, _ := v.(string); text != "" {
						if out.Reasoning == nil {
							out.Reasoning = map[string]string{}
						}
						out.Reasoning[o.Name] = text
					}
					continue
				}
				if err := checkMetric(v); err != nil {
					errs = append(errs, fmt.Errorf("judge %s: output %s: %w", s.Judge.Path, o.Name, err))
					continue
				}
				scores[o.Name] = v
			}
		}
	}
	if len(errs) == 0 {
		return out, nil
	}
	err := errs[0]
	for _, e := range errs[1:] {
		err = fmt.Errorf("%w; %v", err, e)
	}
	return out, err
}

// ReadsTrajectory says whether a metric reads its run's trajectory
// (see dsl.Metric.ReadsTrajectory): only then are an item's events read.
func (s *Scorer) ReadsTrajectory() bool {
	return slices.ContainsFunc(s.Metrics, (*dsl.Metric).ReadsTrajectory)
}

// ItemFields are the dataset fields the metrics read, in declaration
// order: an item's expected value, as the batch views show it.
func (s *Scorer) ItemFields() []string {
	var out []string
	for _, m := range s.Metrics {
		for _, f := range m.ItemFields() {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// judgeMetric runs a judge metric's pipeline on the item and its outputs
// and records its verdict as the metric and its reasoning under the
// metric's name; it returns what the judge spent.
func judgeMetric(ctx context.Context, m *dsl.Metric, env *dsl.ScoreEnv, judge judgeRun, out *Scored) (float64, int, error) {
	res, err := judge(ctx, m.Judge, map[string]any{"item": env.Item, "outputs": env.Outputs})
	if err != nil {
		return 0, 0, fmt.Errorf("judge: %w", err)
	}
	if res.Status != runtime.StatusCompleted {
		return res.CostUSD, int(res.Tokens), fmt.Errorf("judge: run %s %s: %v%s", res.RunID, res.Status, res.Err, res.Reason)
	}
	v := res.Outputs[dsl.JudgeVerdict]
	if err := checkMetric(v); err != nil {
		return res.CostUSD, int(res.Tokens), fmt.Errorf("judge: verdict: %w", err)
	}
	out.Scores[m.Name] = v
	if r, ok := res.Outputs[dsl.JudgeReasoning].(string); ok && r != "" {
		if out.Reasoning == nil {
			out.Reasoning = map[string]string{}
		}
		out.Reasoning[m.Name] = r
	}
	return res.CostUSD, int(res.Tokens), nil
}

// checkMetric refuses a value that is neither a boolean nor a number
// (checked at load when its type is known, here when it was not).
func checkMetric(v any) error {
	switch v.(type) {
	case bool, int, int64, float64:
		return nil
	}
	return fmt.Errorf("gave %s; a metric must be true/false or a number", kindOf(v))
}

// Passed says whether an item's scores pass the primary metric.
func (s *Scorer) Passed(scores map[string]any) bool {
	return s != nil && s.Primary != "" && scores[s.Primary] == true
}
