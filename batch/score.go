package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
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
			if t := types[n]; t != nil && (t.Kind == dsl.TypeBool || dsl.ChecksType(t)) {
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
	// Checks are the checks of the metrics whose value is a list of
	// checks, by metric.
	Checks map[string]store.Checks
	// The judge's spend, which counts toward the item's.
	CostUSD float64
	Tokens  int
}

// Score computes the metrics of a completed run. A metric that cannot be
// computed is left out and named in the error.
func (s *Scorer) Score(ctx context.Context, env *dsl.ScoreEnv, judge judgeRun) (Scored, error) {
	out := Scored{Scores: map[string]any{}}
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
			err = out.record(m.Name, v)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("metric %s: %w", m.Name, err))
		}
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
				if err := out.record(o.Name, v); err != nil {
					errs = append(errs, fmt.Errorf("judge %s: output %s: %w", s.Judge.Path, o.Name, err))
				}
			}
		}
	}
	if len(errs) == 0 {
		return out, nil
	}
	return out, scoreErrors(errs)
}

// scoreErrors are the metrics of an item that could not be computed.
type scoreErrors []error

func (e scoreErrors) Error() string {
	parts := make([]string, len(e))
	for i, err := range e {
		parts[i] = err.Error()
	}
	return strings.Join(parts, "; ")
}

func (e scoreErrors) Unwrap() []error { return e }

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

// Expectations are, by metric, the comparisons of an output with a
// dataset field it passes by (see dsl.Metric.Expectations).
func (s *Scorer) Expectations() map[string][]dsl.Expectation {
	out := map[string][]dsl.Expectation{}
	for _, m := range s.Metrics {
		if es := m.Expectations(); es != nil {
			out[m.Name] = es
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

// record keeps a metric's value: a boolean or a number as it is, a list
// of checks as whether they pass, with the checks.
func (out *Scored) record(name string, v any) error {
	cs, isChecks, err := checksOf(v)
	switch {
	case err != nil:
		return err
	case !isChecks:
		if err := checkMetric(v); err != nil {
			return err
		}
		out.Scores[name] = v
		return nil
	}
	if out.Checks == nil {
		out.Checks = map[string]store.Checks{}
	}
	pass, scored := verdict(&cs)
	out.Checks[name] = cs
	if !scored {
		return &unscoredError{checks: len(cs.List)}
	}
	out.Scores[name] = pass
	return nil
}

// ClassUnscored is the error class of a completed item none of whose
// checks could be checked: it has no verdict, so it never counts as
// passed.
const ClassUnscored = "unscored"

type unscoredError struct{ checks int }

func (e *unscoredError) Error() string {
	switch e.checks {
	case 0:
		return "unscored: it has no checks"
	case 1:
		return "unscored: its one check could not be checked"
	}
	return fmt.Sprintf("unscored: none of its %d checks could be checked", e.checks)
}

// scoreClass is the class of an item whose scoring failed: unscored when
// every failure was a metric with no check left, score otherwise.
func scoreClass(err error) string {
	errs, _ := err.(scoreErrors)
	for _, e := range errs {
		if !errors.As(e, new(*unscoredError)) {
			return ClassScore
		}
	}
	if len(errs) == 0 {
		return ClassScore
	}
	return ClassUnscored
}

// checksOf reads a metric's value as its checks: a list of {pass, name,
// reason, score, weight}, or {checks: LIST, threshold: N} (promptfoo's
// test threshold). isChecks is false for any other value.
func checksOf(v any) (cs store.Checks, isChecks bool, err error) {
	list, isList := v.([]any)
	if m, ok := v.(map[string]any); ok {
		if list, isList = m["checks"].([]any); !isList {
			return cs, false, nil
		}
		switch t := m["threshold"].(type) {
		case nil:
		case int, int64, float64:
			cs.Threshold = number(t)
		default:
			return cs, true, fmt.Errorf("threshold: gave %s; it is a number", kindOf(t))
		}
	}
	if !isList {
		return cs, false, nil
	}
	cs.List = []store.Check{}
	for i, x := range list {
		c, err := check(x)
		if err != nil {
			return cs, true, fmt.Errorf("check %d: %w", i+1, err)
		}
		cs.List = append(cs.List, c)
	}
	return cs, true, nil
}

// check is one check of a list: pass true, false or null (not checked);
// score from 0 to 1 (by default 1 when it passed, else 0); weight 1 by
// default.
func check(x any) (store.Check, error) {
	m, ok := x.(map[string]any)
	if !ok {
		return store.Check{}, fmt.Errorf("gave %s; a check is {pass, name, reason, score, weight}", kindOf(x))
	}
	c := store.Check{Weight: 1}
	switch p := m["pass"].(type) {
	case nil:
	case bool:
		c.Pass = &p
		if p {
			c.Score = 1
		}
	default:
		return c, fmt.Errorf("pass: gave %s; it is true, false or null (not checked)", kindOf(p))
	}
	for _, f := range []struct {
		name string
		to   *float64
	}{{"score", &c.Score}, {"weight", &c.Weight}} {
		switch n := m[f.name].(type) {
		case nil:
		case int, int64, float64:
			*f.to = number(n)
		default:
			return c, fmt.Errorf("%s: gave %s; it is a number", f.name, kindOf(n))
		}
	}
	for _, f := range []struct {
		name string
		to   *string
	}{{"name", &c.Name}, {"reason", &c.Reason}} {
		switch t := m[f.name].(type) {
		case nil:
		case string:
			*f.to = t
		default:
			*f.to = dsl.Stringify(t)
		}
	}
	return c, nil
}

func number(v any) float64 {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int64:
		return float64(n)
	}
	return v.(float64)
}

// verdict is promptfoo's rule over the checks that were checked: the
// mean of their scores weighted by their weights is cs.Score; they pass
// when every one passed, or, with a threshold, when that mean reaches
// it. scored is false when no check was checked.
func verdict(cs *store.Checks) (pass, scored bool) {
	var total, weight float64
	pass = true
	for _, c := range cs.List {
		if c.Pass == nil {
			continue
		}
		scored = true
		total += c.Score * c.Weight
		weight += c.Weight
		pass = pass && *c.Pass
	}
	if weight > 0 {
		cs.Score = total / weight
	}
	if cs.Threshold > 0 {
		pass = cs.Score >= cs.Threshold
	}
	return pass, scored
}

// checkMetric refuses a value that is neither a boolean nor a number
// (checked at load when its type is known, here when it was not).
func checkMetric(v any) error {
	switch v.(type) {
	case bool, int, int64, float64:
		return nil
	}
	return fmt.Errorf("gave %s; a metric must be true/false, a number or a list of checks", kindOf(v))
}

// Passed says whether an item's scores pass the primary metric.
func (s *Scorer) Passed(scores map[string]any) bool {
	return s != nil && s.Primary != "" && scores[s.Primary] == true
}
