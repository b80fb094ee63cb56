package batch

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/batch/batchtest"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/store"
)

// replying is a fake model that answers every question with text.
func replying(t *testing.T, text string) func(string) (string, bool) {
	srv := llmtest.New(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: text} })
	return srv.Env("sk-" + text)
}

// TestPairwiseJudge: a judge that prefers the output saying "good" picks
// B on every item whichever position B is shown in; the positions are
// drawn at random (both occur) from the seed, and the overall verdict is
// B, with the sign test's p-value.
func TestPairwiseJudge(t *testing.T) {
	st := batchtest.OpenStore(t)
	pipeline, dataset, _, _ := resumeFixture(t, 12)
	s := Settings{Concurrency: 4, Metrics: []string{"exact"}, Primary: "exact"}
	a, _ := startBatch(t, st, pipeline, dataset, s, replying(t, "bad"))
	b, _ := startBatch(t, st, pipeline, dataset, s, replying(t, "good"))
	c, err := Compare(context.Background(), st, a, b)
	if err != nil {
		t.Fatal(err)
	}
	judge := llmtest.New(t)
	judge.Handle(func(req llmtest.Request) llmtest.Reply {
		msgs := req.Body["messages"].([]any)
		prompt := msgs[len(msgs)-1].(map[string]any)["content"].(string)
		first, _, _ := strings.Cut(strings.SplitN(prompt, "First output:", 2)[1], "Second output:")
		better := "second"
		if strings.Contains(first, `"good"`) {
			better = "first"
		}
		reply, _ := json.Marshal(map[string]string{"reasoning": "good beats bad", "better": better})
		return llmtest.Reply{Text: string(reply)}
	})
	j := &PairwiseJudge{Engine: engineFor(t, st, judge.Env("sk-judge")), Model: "gpt-4.1", Seed: 5}
	res, err := j.Judge(context.Background(), st, c)
	if err != nil {
		t.Fatal(err)
	}
	// Each verdict is a child run of batch B: listed under it, not on its
	// own, and never the last run.
	judged, _, err := st.RunsMatching(context.Background(), store.RunQuery{ChildOf: b.ID})
	if err != nil || len(judged) != 12 {
		t.Fatalf("%d runs under batch %s (%v), want a judge's run per item", len(judged), b.ID, err)
	}
	listed, _, err := st.RunsMatching(context.Background(), store.RunQuery{BatchItems: true})
	for _, r := range listed {
		if r.ChildOf != "" {
			t.Fatalf("the runs list shows the judge's run %s on its own", r.ID)
		}
	}
	if last, err := st.FindRun(context.Background(), "last"); err != nil || last.ChildOf != "" {
		t.Fatalf("last names %+v (%v), a judge's run", last, err)
	}
	bFirst := 0
	for _, v := range res.Items {
		if v.Winner != "b" || v.Reasoning != "good beats bad" {
			t.Fatalf("item %+v", v)
		}
		if v.BFirst {
			bFirst++
		}
	}
	if len(res.Items) != 12 || res.WinsB != 12 || res.Better != "b" || !near(res.PValue, McNemar(12, 0)) || bFirst == 0 || bFirst == 12 {
		t.Fatalf("result %+v (B shown first %d times)", res, bFirst)
	}
	for _, req := range judge.Requests() {
		if req.Model != "gpt-4.1" || !strings.Contains(string(req.Raw), DefaultPairwiseRubric) || !strings.Contains(string(req.Raw), "question") {
			t.Fatalf("judge request: %s", req.Raw)
		}
	}
}
