package nodes_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
)

const fakeKey = "sk-test-FLOWRUN-SECRET-4242"

// waits records the waits the model client asked for instead of sleeping.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.d = append(w.d, d)
	w.mu.Unlock()
	return ctx.Err()
}

// modelKinds is the registry with a model client talking to srv.
func modelKinds(srv *llmtest.Server, opts llm.Options) runtime.Registry {
	opts.Env = srv.Env(fakeKey)
	if opts.BaseBackoff == 0 {
		opts.BaseBackoff = time.Millisecond
	}
	return nodes.Kinds(nodes.Services{LLM: llm.New(opts)})
}

func TestLLMStructuredOutput(t *testing.T) {
	const src = `
version: 1
name: t
models: {default: {model: gpt-4.1-mini}}
nodes:
  - id: judge
    llm:
      prompt: Is 7 prime?
      output_schema:
        type: object
        properties: {prime: {type: boolean}, why: {type: string}}
        required: [prime, why]
      repair_retries: %d
outputs: {prime: nodes.judge.json.prime, text: nodes.judge.text}
`
	cases := []struct {
		name    string
		repairs string
		replies []llmtest.Reply
		prime   any
		class   errclass.Class
	}{
		{"valid", "0", []llmtest.Reply{llmtest.JSON(map[string]any{"prime": true, "why": "no divisors"})}, true, ""},
		{"invalid then repaired", "1", []llmtest.Reply{llmtest.JSON(map[string]any{"prime": "yes"}),
			llmtest.JSON(map[string]any{"prime": true, "why": "fixed"})}, true, ""},
		{"invalid and failed", "1", []llmtest.Reply{llmtest.JSON(map[string]any{"prime": "yes"}), llmtest.Text("still not json")},
			nil, errclass.InvalidOutput},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := llmtest.New(t)
			srv.Push(c.replies...)
			p := load(t, strings.Replace(src, "%d", c.repairs, 1), nil)
			res, _ := run(t, p, modelKinds(srv, llm.Options{}), nil)
			if c.class != "" {
				var ne *runtime.NodeError
				if res.Status != runtime.StatusFailed || !errors.As(res.Err, &ne) || ne.Class != c.class {
					t.Fatalf("status %s err %v, want class %s", res.Status, res.Err, c.class)
				}
				return
			}
			mustComplete(t, res)
			if res.Outputs["prime"] != c.prime {
				t.Fatalf("outputs %v", res.Outputs)
			}
			rf := srv.Requests()[0].Body["response_format"].(map[string]any)
			if rf["type"] != "json_schema" || rf["json_schema"].(map[string]any)["strict"] != true {
				t.Fatalf("response_format on the wire: %v", rf)
			}
			if got := srv.Calls(); got != len(c.replies) {
				t.Fatalf("%d calls, want %d", got, len(c.replies))
			}
		})
	}
}

func TestLLMMemoryAcrossLoopIterations(t *testing.T) {
	srv := llmtest.New(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		return llmtest.Text("answer " + string(rune('0'+r.N)))
	})
	p := load(t, `
version: 1
name: t
models: {default: {model: gpt-4.1-mini}}
memories:
  chat: {system: "You count."}
nodes:
  - id: talk
    loop:
      max_iterations: 3
      body:
        - id: say
          llm: {memory: chat, prompt: "turn ${{ loop.iteration }}"}
outputs: {last: nodes.say.text}
`, nil)
	res, _ := run(t, p, modelKinds(srv, llm.Options{}), nil)
	mustComplete(t, res)
	third := srv.Requests()[2].Body["messages"].([]any)
	var got []string
	for _, m := range third {
		mm := m.(map[string]any)
		got = append(got, mm["role"].(string)+": "+llmtest.MessageText(mm["content"]))
	}
	want := []string{"system: You count.", "user: turn 1", "assistant: answer 1", "user: turn 2", "assistant: answer 2", "user: turn 3"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("third request's messages:\n%v\nwant\n%v", got, want)
	}
}

func TestLLMImagesAsDataURLs(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.Text("a red pixel"))
	png, _ := base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")
	dir := t.TempDir()
	img := filepath.Join(dir, "pixel.png")
	if err := os.WriteFile(img, png, 0o644); err != nil {
		t.Fatal(err)
	}
	p := load(t, `
version: 1
name: t
inputs: {img: {type: string, format: path}}
models: {default: {model: gpt-4.1-mini}}
nodes:
  - id: look
    llm: {prompt: "What is this?", images: ["${{ inputs.img }}", "https://example.com/cat.jpg"]}
outputs: {text: nodes.look.text}
`, nil)
	res, _ := run(t, p, modelKinds(srv, llm.Options{}), map[string]any{"img": img})
	mustComplete(t, res)
	raw := string(srv.Last().Raw)
	if !strings.Contains(raw, `"url":"data:image/png;base64,`+base64.StdEncoding.EncodeToString(png)+`"`) {
		t.Fatalf("the local image is not sent as a data URL:\n%s", raw)
	}
	if !strings.Contains(raw, `"url":"https://example.com/cat.jpg"`) {
		t.Fatalf("an http URL must pass through:\n%s", raw)
	}
}

func TestLLMRecoverableErrorsThenSuccess(t *testing.T) {
	cases := []struct {
		name  string
		first llmtest.Reply
		class errclass.Class
	}{
		{"500", llmtest.Error(500, "boom"), errclass.Server},
		{"connection reset", llmtest.Reply{Reset: true}, errclass.Connection},
		{"truncated JSON body", llmtest.Reply{Body: `{"id": "x", "choices": [`}, errclass.Server},
		{"timeout", llmtest.Reply{Delay: 2 * time.Second, Text: "late"}, errclass.Timeout},
		{"429 Retry-After", llmtest.RateLimited("Retry-After", "7"), errclass.RateLimit},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := llmtest.New(t)
			srv.Push(c.first, llmtest.Text("fine"))
			w := &waits{}
			p := load(t, `
version: 1
name: t
models: {default: {model: gpt-4.1-mini, timeout: 200ms}}
nodes:
  - id: ask
    llm: {prompt: hi}
outputs: {text: nodes.ask.text}
`, nil)
			res, rec := run(t, p, modelKinds(srv, llm.Options{Sleep: w.sleep}), nil)
			mustComplete(t, res)
			if res.Outputs["text"] != "fine" || srv.Calls() != 2 {
				t.Fatalf("outputs %v after %d calls", res.Outputs, srv.Calls())
			}
			var classes []errclass.Class
			for _, e := range rec.All() {
				if e.Type == runtime.EventModelTurn {
					classes = append(classes, e.Turn.Class)
				}
			}
			if len(classes) != 2 || classes[0] != c.class || classes[1] != "" {
				t.Fatalf("turn classes %q, want [%s, ok]", classes, c.class)
			}
			if c.class == errclass.RateLimit && (len(w.d) != 1 || w.d[0] != 7*time.Second) {
				t.Fatalf("waits %v, want exactly Retry-After's 7s", w.d)
			}
		})
	}
}

func TestLLM401FailsAtOnceWithoutLeakingTheKey(t *testing.T) {
	srv := llmtest.New(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Error(401, "Incorrect API key provided: "+fakeKey) })
	p := load(t, `
version: 1
name: t
models: {default: {model: gpt-4.1-mini}}
nodes:
  - id: ask
    llm: {prompt: hi}
    retry: {max_attempts: 3, backoff: 1ms}
`, nil)
	res, rec := run(t, p, modelKinds(srv, llm.Options{}), nil)
	if res.Status != runtime.StatusFailed || srv.Calls() != 1 {
		t.Fatalf("status %s after %d calls: a 401 fails at once", res.Status, srv.Calls())
	}
	if !strings.Contains(res.Err.Error(), "401 Unauthorized from "+srv.URL+"/chat/completions: check OPENAI_API_KEY") {
		t.Fatalf("error does not name the endpoint and the fix: %v", res.Err)
	}
	all, _ := json.Marshal(rec.All())
	if strings.Contains(res.Err.Error(), fakeKey) || strings.Contains(string(all), fakeKey) {
		t.Fatal("the API key leaked into an error or an event")
	}
}

func TestLLMMapRespectsConcurrencyAndRPM(t *testing.T) {
	srv := llmtest.New(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Text: "ok", Delay: 2 * time.Millisecond}
	})
	p := load(t, `
version: 1
name: t
models: {default: {model: gpt-4.1-mini, max_concurrency: 4, rpm: 6000}}
nodes:
  - id: fan
    map:
      over: 1..200
      max_concurrency: 50
      body:
        - id: ask
          llm: {prompt: "n=${{ item }}"}
outputs: {n: len(nodes.fan)}
`, nil)
	res, _ := run(t, p, modelKinds(srv, llm.Options{}), nil)
	mustComplete(t, res)
	if res.Outputs["n"] != 200 || srv.Calls() != 200 {
		t.Fatalf("outputs %v, %d calls", res.Outputs, srv.Calls())
	}
	if m := srv.MaxInFlight(); m > 4 {
		t.Fatalf("%d requests in flight, model max_concurrency is 4", m)
	}
	// rpm 6000 is 100 a second: any 101 consecutive requests span about
	// a second, where without the limit they take tens of milliseconds.
	// The bound sits well between, as the delay from the limiter to the
	// server on a loaded machine shifts single requests.
	reqs := srv.Requests()
	for i := 0; i+100 < len(reqs); i++ {
		if gap := reqs[i+100].At.Sub(reqs[i].At); gap < 2*time.Second/3 {
			t.Fatalf("requests %d..%d came %s apart: rpm 6000 allows 100 a second", i, i+100, gap)
		}
	}
}

// TestMaxCostStopsRun: limits.max_cost_usd is a hard cap. Each call
// reserves its worst case (its prompt's tokens at $0.10 each) and costs
// $0.50, so the run stops at the call whose worst case no longer fits,
// never past the cap, and its reason tells the cost the store keeps.
func TestMaxCostStopsRun(t *testing.T) {
	srv := llmtest.New(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Text: "ok", Usage: llmtest.Usage{Prompt: 5}}
	})
	p := load(t, `
version: 1
name: t
models: {default: {model: gpt-4.1-mini, price: {input_per_mtok: 100000, output_per_mtok: 0}}}
limits: {max_cost_usd: 2.5}
state: {n: 0}
nodes:
  - id: spend
    loop:
      max_iterations: 10
      body:
        - id: ask
          llm: {prompt: "spend ${{ run.cost_usd }}"}
          set: {n: state.n + 1}
outputs: {n: state.n, cost: run.cost_usd}
`, nil)
	res, _ := run(t, p, modelKinds(srv, llm.Options{}), nil)
	if res.Status != runtime.StatusStopped || !strings.Contains(res.Reason, "limits.max_cost_usd ($2.50) reached: the run has spent "+figures.USD(res.CostUSD)+", and its next model call may cost up to") {
		t.Fatalf("status %s reason %q err %v", res.Status, res.Reason, res.Err)
	}
	calls := srv.Calls()
	if calls < 2 || res.CostUSD > 2.5 || math.Abs(res.CostUSD-0.5*float64(calls)) > 1e-9 || res.Outputs["n"] != calls {
		t.Fatalf("%d calls, cost %v, outputs %v: each call costs $0.50 and the cap is $2.50", calls, res.CostUSD, res.Outputs)
	}
	if !strings.Contains(llmtest.MessageText(srv.Requests()[1].Body["messages"].([]any)[0].(map[string]any)["content"]), "spend 0.5") {
		t.Fatal("run.cost_usd is not visible to expressions")
	}
}

const replayPipeline = `
version: 1
name: t
models: {default: {model: gpt-4.1-mini}}
memories: {m: {}}
nodes:
  - id: rounds
    loop:
      max_iterations: 2
      body:
        - id: fan
          map:
            over: '["a", "b", "c"]'
            body:
              - id: ask
                llm: {prompt: "PROMPT ${{ item }}"}
        - id: sum
          llm: {memory: m, prompt: '${{ join(map(nodes.fan, .text), ",") }}'}
outputs: {fan: nodes.fan, sum: nodes.sum.text}
`

func TestRecordThenReplayOffline(t *testing.T) {
	srv := llmtest.New(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		msgs := r.Body["messages"].([]any)
		last := llmtest.MessageText(msgs[len(msgs)-1].(map[string]any)["content"])
		return llmtest.Text("re: " + last)
	})
	p := load(t, strings.Replace(replayPipeline, "PROMPT", "say", 1), nil)
	cas := llm.NewCassette()
	live, _ := run(t, p, modelKinds(srv, llm.Options{Record: cas}), nil)
	mustComplete(t, live)
	path := filepath.Join(t.TempDir(), "run.cassette.yaml")
	if err := cas.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	loaded, err := llm.LoadCassette(path)
	if err != nil {
		t.Fatal(err)
	}
	offline := nodes.Kinds(nodes.Services{LLM: llm.New(llm.Options{Replay: loaded, Env: func(string) (string, bool) { return "", false }})})
	replayed, _ := run(t, p, offline, nil)
	mustComplete(t, replayed)
	if !reflect.DeepEqual(replayed.Outputs, live.Outputs) {
		t.Fatalf("replayed outputs %v\nlive %v", replayed.Outputs, live.Outputs)
	}
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), fakeKey) {
		t.Fatal("the key is in the cassette")
	}

	// A changed prompt misses, naming the node and what differs.
	changed := load(t, strings.Replace(replayPipeline, "PROMPT", "tell", 1), nil)
	loaded, _ = llm.LoadCassette(path)
	miss, _ := run(t, changed, nodes.Kinds(nodes.Services{LLM: llm.New(llm.Options{Replay: loaded})}), nil)
	if miss.Status != runtime.StatusFailed || !strings.Contains(miss.Err.Error(), "rounds[1]/fan[") || !strings.Contains(miss.Err.Error(), "tell") {
		t.Fatalf("status %s err %v", miss.Status, miss.Err)
	}
}

// TestUnavailableWithoutClient: with no model client the llm kind is not
// registered, and the run says so before anything runs.
func TestUnavailableWithoutClient(t *testing.T) {
	p := load(t, "version: 1\nname: t\nmodels: {default: {model: m}}\nnodes:\n  - id: a\n    llm: {prompt: x}\n", nil)
	err := nodes.Kinds(nodes.Services{}).Check(p)
	if err == nil || !strings.Contains(err.Error(), "kind llm is not available") {
		t.Fatalf("err %v", err)
	}
	_ = dsl.KindLLM
}
