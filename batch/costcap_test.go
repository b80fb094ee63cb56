package batch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowrun/flowrun/batch/batchtest"
	"github.com/flowrun/flowrun/budget"
	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/internal/testwait"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// pricedPipeline answers each question with max_tokens 100 at $0.01 an
// output token and free input: a call may cost $1 at most.
const pricedPipeline = `
version: 1
name: priced
models:
  default: {model: gpt-4.1-mini, price: {input_per_mtok: 0, output_per_mtok: 10000}}
inputs:
  question: {type: string}
nodes:
  - id: answer
    llm: {prompt: "${{ inputs.question }}", max_tokens: 100}
outputs:
  answer: nodes.answer.text
`

// cheapThenDear is a fake model whose "cheap" questions cost $0.01 (one
// output token) and the others $1 (100), each after delay.
func cheapThenDear(t *testing.T, delay time.Duration) *llmtest.Server {
	srv := llmtest.New(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		msgs, _ := r.Body["messages"].([]any)
		last, _ := msgs[len(msgs)-1].(map[string]any)
		completion := 100
		if strings.HasPrefix(llmtest.MessageText(last["content"]), "cheap") {
			completion = 1
		}
		return llmtest.Reply{Text: "ok", Usage: llmtest.Usage{Completion: completion}, Delay: delay}
	})
	return srv
}

// TestCostCapHoldsWhenLaterItemsCostMore is issue 32's batch at small
// scale: at concurrency 8, four items of $0.01 and then $1 ones under a
// $2 cap. Admitting items by the costliest seen so far ($0.01) started
// four $1 items at once and spent twice the cap; each call reserving its
// worst case ($1) from the batch's ledger before it is sent keeps the
// spend within it, and the stop line tells the stored total.
func TestCostCapHoldsWhenLaterItemsCostMore(t *testing.T) {
	st := batchtest.OpenStore(t)
	dir := t.TempDir()
	var lines []string
	for i := 1; i <= 40; i++ {
		q := fmt.Sprintf("dear %d", i)
		if i <= 4 {
			q = fmt.Sprintf("cheap %d", i)
		}
		lines = append(lines, fmt.Sprintf(`{"question": %q}`, q))
	}
	pipeline, dataset := write(t, dir, "priced.yaml", pricedPipeline), write(t, dir, "items.jsonl", strings.Join(lines, "\n")+"\n")
	srv := cheapThenDear(t, 30*time.Millisecond)
	const limit = 2.0
	b, status := startBatch(t, st, pipeline, dataset, Settings{Concurrency: 8, MaxCostUSD: limit}, srv.Env("sk-test"))
	stopped, err := st.Batch(context.Background(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	cost, done := spent(t, st, b)
	if cost > limit+1e-9 {
		t.Fatalf("the batch spent $%.2f on %d items under a $%.0f cap", cost, done, limit)
	}
	if status != runtime.StatusStopped || done == 0 || !strings.HasPrefix(stopped.Reason, fmt.Sprintf("the batch's cost cap of $2.00 reached: %s spent", figures.USD(cost))) {
		t.Fatalf("%s (%s) with %d items done and $%.2f stored, want stopped by the cap with the stored spend", status, stopped.Reason, done, cost)
	}
}

// TestPairwiseJudgeUnderACap: compare --judge had no cap, and a judge
// that writes as much as it may cost $2 an item. Under a $1 cap each
// call is sent with the max_tokens the cap has left (gpt-4.1's 32768 at
// most), the judge stops at the first call it cannot afford, and what
// it spent, the ledger's settled total, stays within the cap.
func TestPairwiseJudgeUnderACap(t *testing.T) {
	st := batchtest.OpenStore(t)
	pipeline, dataset, _, _ := resumeFixture(t, 10)
	s := Settings{Concurrency: 4, Metrics: []string{"exact"}, Primary: "exact"}
	a, _ := startBatch(t, st, pipeline, dataset, s, replying(t, "bad"))
	b, _ := startBatch(t, st, pipeline, dataset, s, replying(t, "good"))
	c, err := Compare(context.Background(), st, a, b)
	if err != nil {
		t.Fatal(err)
	}
	judge := llmtest.New(t)
	judge.Handle(func(req llmtest.Request) llmtest.Reply {
		completion := 250000 // $2 at gpt-4.1's $8 per million
		if bound, ok := req.Body["max_tokens"].(float64); ok {
			completion = min(completion, int(bound))
		}
		return llmtest.Reply{Text: `{"reasoning": "b", "better": "second"}`, Usage: llmtest.Usage{Prompt: 100, Completion: completion}}
	})
	j := &PairwiseJudge{Engine: engineFor(t, st, judge.Env("sk-judge")), Model: "gpt-4.1", Seed: 5, MaxCostUSD: 1}
	res, err := j.Judge(context.Background(), st, c)
	if err != nil {
		t.Fatal(err)
	}
	if res.CostUSD > 1+1e-9 || len(res.Items) == 0 || len(res.Items) == 10 || !strings.HasPrefix(res.Stopped, "the judge's cost cap of $1.00 reached: "+figures.USD(res.CostUSD)+" spent") {
		t.Fatalf("judged %d items for $%.4f, stopped %q: want stopped within the $1 cap", len(res.Items), res.CostUSD, res.Stopped)
	}
	for _, req := range judge.Requests() {
		if bound, _ := req.Body["max_tokens"].(float64); bound <= 0 || bound > 32768 {
			t.Fatalf("judge call with max_tokens %v, want what the cap affords, at most 32768", req.Body["max_tokens"])
		}
	}
}

// lostLedger is a remote batch's ledger that can be read once, and then
// no more, as when NATS stops answering.
type lostLedger struct{ reads atomic.Int32 }

func (l *lostLedger) State(context.Context) (float64, *budget.ExceededError, error) {
	if l.reads.Add(1) > 1 {
		return 0, nil, errors.New("reading the cost ledger b1: nats: timeout")
	}
	return 0, nil, nil
}

// TestRemoteBatchHaltsWhenItsLedgerCannotBeRead: a remote batch whose
// ledger cannot be read as a run ends stopped cannot tell whether the
// ledger refused it, and workers hand back the items of a refused batch
// until it halts. The batch halts and ends stopped, naming the ledger,
// rather than wait for results that never come (it waited: the read
// error stopped the queueing but halted nothing).
func TestRemoteBatchHaltsWhenItsLedgerCannotBeRead(t *testing.T) {
	ctx := context.Background()
	st := batchtest.OpenStore(t)
	dir := t.TempDir()
	pipeline, dataset := write(t, dir, "priced.yaml", pricedPipeline), write(t, dir, "items.jsonl", "{\"question\": \"a\"}\n{\"question\": \"b\"}\n")
	p, d, b := loadBatch(t, pipeline, dataset)
	r := NewRunner(st, p, nil, Settings{MaxCostUSD: 1})
	if err := r.Create(ctx, b, d.Items, func(*store.Batch) {}); err != nil {
		t.Fatal(err)
	}
	halted := make(chan struct{})
	var once sync.Once
	r.Halt = func(string) { once.Do(func() { close(halted) }) }
	r.RemoteLedger = func(context.Context, string, float64, float64) (Ledger, error) { return &lostLedger{}, nil }
	r.Remote = func(ctx context.Context, row *store.BatchItem, _ map[string]any, sink runtime.EventSink) (*runtime.Result, error) {
		sink.Event(runtime.Event{Type: runtime.EventRunFinished, Run: row.Run, Status: runtime.StatusStopped})
		select {
		case <-halted:
			return &runtime.Result{RunID: row.Run, Status: runtime.StatusStopped, Reason: "halted"}, nil
		case <-time.After(testwait.Hang()):
			return nil, errors.New("the batch was never halted")
		}
	}
	status, reason, err := r.Run(ctx, b, d.Items)
	if err != nil || status != runtime.StatusStopped || !strings.Contains(reason, "reading the batch's cost ledger: ") {
		t.Fatalf("%s (%s), %v: want stopped, naming the ledger", status, reason, err)
	}
}

// TestCostCapReadsAsMoney: a cap is named as every amount reads, a tiny
// one too (it read "--max-cost-usd 5e-05" beside "$0.00 spent"), and
// without the flag that set it, which the front end names.
func TestCostCapReadsAsMoney(t *testing.T) {
	for usd, want := range map[float64]string{5e-05: "the batch's cost cap of $0.00005", 0.5: "the batch's cost cap of $0.50", 20: "the batch's cost cap of $20.00"} {
		if got := batchCap(usd); got != want {
			t.Errorf("a cap of %v reads %q, want %q", usd, got, want)
		}
	}
}
