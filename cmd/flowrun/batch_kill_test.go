package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

var batchKills = flag.Int("batch-kills", 8, "how many kill points TestBatchKillAndResume tries")

// killBatchPipeline makes two model calls per item, the second reading the
// first; every prompt names its item and node for the fake model.
const killBatchPipeline = `
version: 1
name: killbatch
models: {default: {model: gpt-4.1-mini}}
inputs:
  id: {type: string}
nodes:
  - id: a
    llm: {prompt: "@${{ inputs.id }}/a go"}
  - id: b
    llm: {prompt: "@${{ inputs.id }}/b ${{ nodes.a.text }}"}
outputs:
  b: nodes.b.text
score:
  ok: len(outputs.b) > 0
`

// batchRecord is a store's batch as the kill test reads it: per item id,
// its status, its run's outputs and the model calls its run finished.
type batchRecord struct {
	status   map[string]runtime.Status
	outputs  map[string]string
	finished map[string]bool // "<id>/<node>" with a checkpoint
	runs     int
}

func readBatchRecord(t *testing.T, db string) batchRecord {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, items := lastBatchIn(t, st)
	rec := batchRecord{status: map[string]runtime.Status{}, outputs: map[string]string{}, finished: map[string]bool{}}
	runs, _ := st.Runs(ctx)
	rec.runs = len(runs)
	for _, it := range items {
		id := fmt.Sprint(it.Item["id"])
		rec.status[id] = it.Status
		if it.Run == "" {
			continue
		}
		if run, err := st.Run(ctx, it.Run); err == nil {
			rec.outputs[id] = fmt.Sprint(run.Outputs["b"])
		}
		cps, err := st.Checkpoints(ctx, it.Run, 0)
		if err != nil {
			continue
		}
		for _, cp := range cps {
			rec.finished[id+"/"+cp.Path] = true
		}
	}
	return rec
}

// TestBatchKillAndResume kills flowrun batch with SIGKILL at random points
// (when the k-th model request arrives, after a random delay), then
// resumes it: every item ends with exactly one result and one run, the
// outputs are those of an uninterrupted batch, and the resume asks the
// model for no call whose node had finished before the kill.
func TestBatchKillAndResume(t *testing.T) {
	dir := t.TempDir()
	pipeline := writeFile(t, dir, "kill.yaml", killBatchPipeline)
	const items = 10
	var lines []string
	for i := 1; i <= items; i++ {
		lines = append(lines, fmt.Sprintf(`{"id": "i%d"}`, i))
	}
	data := writeFile(t, dir, "items.jsonl", strings.Join(lines, "\n"))
	model := newDurModel(t)
	args := []string{"batch", pipeline, "--dataset", data, "--concurrency", "3"}

	base := filepath.Join(dir, "base.db")
	model.hook("sk-base", func(int, string) llmtest.Reply { return llmtest.Reply{Delay: killReplyDelay} })
	if code, _, stderr := runDurProc(t, model.env("sk-base"), append(args, "--store", base)...); code != exitOK {
		t.Fatalf("uninterrupted batch: exit %d\n%s", code, stderr)
	}
	want := readBatchRecord(t, base)
	if len(want.outputs) != items || want.runs != items {
		t.Fatalf("uninterrupted batch: %d outputs, %d runs", len(want.outputs), want.runs)
	}

	seed := *killSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("%d kill points, seed %d (rerun with -kill-seed=%d)", *batchKills, seed, seed)
	rng := mrand.New(mrand.NewPCG(seed, 0xba7c4))
	outcomes := map[string]int{}
	for i := range *batchKills {
		k := 1 + rng.IntN(2*items)
		delay := time.Duration(rng.Float64() * float64(6*killReplyDelay))
		t.Run(fmt.Sprintf("%02d/k=%d/delay=%s", i, k, delay.Round(10*time.Microsecond)), func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "runs.db")
			key := fmt.Sprintf("sk-%d-batch", i)
			arrived := make(chan struct{})
			model.hook(key, func(n int, _ string) llmtest.Reply {
				if n == k {
					close(arrived)
				}
				return llmtest.Reply{Delay: killReplyDelay}
			})
			p := startDurProc(t, model.env(key), append(args, "--store", db)...)
			select {
			case <-arrived:
				time.Sleep(delay)
				p.kill()
			case <-p.exited():
				t.Fatalf("batch ended before model request %d\n%s", k, p.stderr())
			case <-time.After(durDeadline):
				t.Fatalf("model request %d never came\n%s", k, p.abort())
			}
			if code := p.wait(); code != -1 {
				outcomes["finished before the kill"]++
				return
			}
			before := readBatchRecord(t, db)
			// Read by another process, the killed batch (unless it had
			// recorded its end) and the items it had in flight are
			// interrupted, none left running.
			_, shown, _ := flowrunWithInput(t, "", "batch", "show", "last", "--format", "json", "--store", db)
			var sum struct {
				Status string
				Items  struct{ Running, Interrupted, Completed int }
			}
			if err := json.Unmarshal([]byte(shown), &sum); err != nil || sum.Status != "interrupted" && sum.Status != "completed" || sum.Items.Running != 0 {
				t.Errorf("killed batch shows as %s with %d running items (%v)\n%s", sum.Status, sum.Items.Running, err, shown)
			}
			done := 0
			for _, s := range before.status {
				if s == "completed" {
					done++
				}
			}
			outcomes[fmt.Sprintf("killed with %d items done", done)]++

			rkey := fmt.Sprintf("sk-%d-resume", i)
			model.hook(rkey, func(int, string) llmtest.Reply { return llmtest.Reply{Delay: killReplyDelay} })
			code, _, stderr := runDurProc(t, model.env(rkey), "batch", "resume", "last", "--store", db)
			if code != exitOK || !strings.Contains(stderr, fmt.Sprintf("completed: %d items, %d completed, 0 failed", items, items)) {
				t.Fatalf("resume: exit %d\n%s", code, stderr)
			}
			for _, path := range model.paths(rkey) {
				id, _, _ := strings.Cut(path, "/")
				if before.finished[path] || before.status[id] == "completed" {
					t.Errorf("the resume asked the model again for %s, finished before the kill", path)
				}
			}
			after := readBatchRecord(t, db)
			if after.runs != items {
				t.Errorf("%d runs for %d items: an item was run twice", after.runs, items)
			}
			for id, out := range want.outputs {
				if after.status[id] != "completed" || after.outputs[id] != out {
					t.Errorf("item %s: %s with output %q, want completed with %q", id, after.status[id], after.outputs[id], out)
				}
			}
		})
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
	for o, n := range outcomes {
		t.Logf("%3d %s", n, o)
	}
}
