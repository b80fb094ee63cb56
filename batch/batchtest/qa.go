package batchtest

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// QAPipeline asks the model one question per item and scores the answer
// against the item's expected field. Its price makes costs exact: a turn
// of 100 prompt and 20 completion tokens costs $0.14. Its system prompt
// makes what is sent count exactly 100 tokens, as QAModel reports, so
// that a cost cap's worst case for a call (llm.WorstCase) is what the
// call costs in input. It is a format:
// its %s adds to the model's settings (fmt.Sprintf(QAPipeline, "") adds
// nothing).
const QAPipeline = `
version: 1
name: qa
models:
  default: {model: gpt-4.1-mini, price: {input_per_mtok: 1000, output_per_mtok: 2000}%s}
inputs:
  question: {type: string}
nodes:
  - id: answer
    llm: {system: "x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x", prompt: "Q: ${{ inputs.question }}"}
outputs:
  answer: trim(nodes.answer.text)
score:
  exact: outputs.answer == item.expected
  chars: len(outputs.answer)
`

// DollarQAPipeline is QAPipeline priced so that a turn of 100 prompt
// tokens costs exactly $1, whatever its completion: whole-dollar costs
// and caps, which settings store as JSON integers.
var DollarQAPipeline = strings.Replace(fmt.Sprintf(QAPipeline, ""), "input_per_mtok: 1000, output_per_mtok: 2000", "input_per_mtok: 10000, output_per_mtok: 0", 1)

// WriteJudgedQA writes into dir QAPipeline scored also by a judge
// pipeline (judge.yaml, whose verdict is whether the answer is the
// expected one and whose tokens are the run's), and returns the
// pipeline's path.
func WriteJudgedQA(t *testing.T, dir string) string {
	t.Helper()
	files := map[string]string{
		"judge.yaml": `
version: 1
name: judge
inputs:
  item: {type: object}
  outputs: {type: object}
  run: {type: object}
outputs:
  verdict: inputs.outputs.answer == inputs.item.expected
  tokens: inputs.run.tokens
`,
		"qa.yaml": strings.Replace(fmt.Sprintf(QAPipeline, ""), "score:\n", "score:\n  pipeline: judge.yaml\n", 1),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "qa.yaml")
}

// QAHalfRight are n JSONL lines for QAPipeline, questions q1..qN whose
// expected answer is right ("AN") for the odd ones and wrong for the
// even ones.
func QAHalfRight(n int) []string {
	var lines []string
	for i := 1; i <= n; i++ {
		expected := fmt.Sprintf("A%d", i)
		if i%2 == 0 {
			expected = "wrong"
		}
		lines = append(lines, fmt.Sprintf(`{"question": "q%d", "expected": %q}`, i, expected))
	}
	return lines
}

// QAMixedLines are eleven JSONL lines for QAPipeline: QAHalfRight(8),
// then a line that is not JSON, a line without the question and the
// question the model refuses.
func QAMixedLines() []string {
	return append(QAHalfRight(8), `{"question": "q9", "expected": `, `{"expected": "A10"}`, `{"question": "boom", "expected": "A11"}`)
}

// Spent is the cost of items and how many of them completed.
func Spent(items []*store.BatchItem) (cost float64, completed int) {
	for _, it := range items {
		cost += it.CostUSD
		if it.Status == runtime.StatusCompleted {
			completed++
		}
	}
	return cost, completed
}

// QAModel is a fake model server for QAPipeline: it answers "Q: qN" with
// "AN" (100 prompt and 20 completion tokens, fewer when max_tokens is
// less) after its delay, and the
// question "boom" with a 400; it counts the prompts it is asked.
type QAModel struct {
	// Server is the fake OpenAI server it answers on.
	Server *llmtest.Server
	mu     sync.Mutex
	asked  map[string]int // requests per prompt
	delay  time.Duration
}

// NewQAModel starts a QAModel that answers after delay; it ends with t.
func NewQAModel(t *testing.T, delay time.Duration) *QAModel {
	m := &QAModel{Server: llmtest.New(t), asked: map[string]int{}, delay: delay}
	m.Server.Handle(m.Reply)
	return m
}

// Reply answers r and counts its prompt; a test that puts its own
// handler on Server may hand it the requests meant for the QA model.
func (m *QAModel) Reply(r llmtest.Request) llmtest.Reply {
	msgs, _ := r.Body["messages"].([]any)
	last, _ := msgs[len(msgs)-1].(map[string]any)
	prompt := llmtest.MessageText(last["content"])
	m.mu.Lock()
	m.asked[prompt]++
	m.mu.Unlock()
	q := strings.TrimPrefix(prompt, "Q: ")
	if q == "boom" {
		return llmtest.Error(400, "the model refuses this question")
	}
	completion := 20
	if bound, ok := r.Body["max_tokens"].(float64); ok {
		completion = min(completion, int(bound))
	}
	return llmtest.Reply{Text: "A" + strings.TrimPrefix(q, "q"), Usage: llmtest.Usage{Prompt: 100, Completion: completion}, Delay: m.delay}
}

// Requests are the prompts asked so far ("Q: q1"), each with how often.
func (m *QAModel) Requests() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.asked)
}
