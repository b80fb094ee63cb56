// Command bench measures flowrun's own overhead on the two graphs of the
// LangGraph.js peer benchmark that bench/compare.sh runs beside it: a loop
// of N model steps and a fan-out of K parallel branches joined into a list,
// each with no checkpoints, checkpoints kept in memory, and the SQLite run
// store. Every configuration goes through the real code path: a YAML
// pipeline loaded by dsl.Load and started by the engine, as `flowrun run`
// does, with the node kinds and services it makes; the first two as runs
// it keeps in memory (engine.InMemory, with no checkpointer or one that
// keeps checkpoints in memory), the third in a fresh SQLite run store.
//
//	go run ./cmd/bench               # the suite; QUICK=1 (or -quick) for N=K=1000 only
//	go run ./cmd/bench one loop 10000 fn sqlite 5 [-cpuprofile FILE]
//
// The suite runs each configuration in a fresh subprocess of itself, so
// that the peak RSS it reports (the child's ru_maxrss, what /usr/bin/time
// %M prints for the peer) belongs to one configuration. Each line has the
// peer's keys, prefixed flowrun:
//
//	flowrun mode=loop n=1000 model=fn ckpt=none checkpoints_per_run=0 build_ms=..
//	  cold_ms=.. warm_med_ms=.. warm_min_ms=.. repeats=5 steps_per_s=..
//	  us_per_step=.. peak_rss_kb=.. proc_wall_s=..
//
// Models: "fn" is an executor put in place of the llm kind (through
// engine.Doubles.Kinds) that renders the prompt and answers at once, in Go
// (the peer's plain async function); "fakelist" is the real llm node and
// the engine's model client, whose HTTP client (engine.Doubles.HTTPClient)
// answers the OpenAI chat completions wire format in process, with no
// socket (the peer's FakeListChatModel, a real LangChain model with no
// network). See docs/performance.md.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/internal/procstat"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "one" {
		os.Exit(one(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "baseline" {
		fmt.Println("mode=baseline")
		return
	}
	os.Exit(suite(os.Args[1:]))
}

// config is one measured configuration.
type config struct {
	mode    string // loop or fanout
	n       int
	model   string // fn or fakelist
	ckpt    string // none, memory or sqlite
	repeats int
}

func (c config) args() []string {
	return []string{c.mode, strconv.Itoa(c.n), c.model, c.ckpt, strconv.Itoa(c.repeats)}
}

// suite runs every configuration, each in a subprocess, and prints a line
// per configuration.
func suite(args []string) int {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	quick := fs.Bool("quick", os.Getenv("QUICK") == "1", "N=1000 loops and K=1000 fan-outs only (QUICK=1)")
	repeats := fs.Int("repeats", envInt("REPEATS", 5), "warm runs per configuration; the median is reported (REPEATS)")
	only := fs.String("only", "", "run only the configurations whose line contains every comma-separated `word`, e.g. mode=loop,ckpt=sqlite")
	_ = fs.Parse(args)
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	fmt.Printf("# date=%s host_cpus=%d cpu=%q mem_total_kb=%d go=%s gomaxprocs=%d repeats=%d\n",
		time.Now().UTC().Format(time.RFC3339), goruntime.NumCPU(), cpuModel(), memTotalKB(), goruntime.Version(),
		goruntime.GOMAXPROCS(0), *repeats)

	if rss, wall, _, err := child(self, []string{"baseline"}); err == nil {
		fmt.Printf("flowrun mode=baseline_imports_only peak_rss_kb=%d proc_wall_s=%.2f\n", rss, wall)
	}
	var cs []config
	ns, ks := []int{1000, 10000}, []int{1000, 2000, 4000, 10000}
	if *quick {
		ns, ks = []int{1000}, []int{1000}
	}
	for _, mode := range []string{"loop", "fanout"} {
		sizes := ns
		if mode == "fanout" {
			sizes = ks
		}
		for _, n := range sizes {
			for _, model := range []string{"fn", "fakelist"} {
				for _, ckpt := range []string{"none", "memory", "sqlite"} {
					cs = append(cs, config{mode, n, model, ckpt, *repeats})
				}
			}
		}
	}
	failed := 0
	for _, c := range cs {
		key := fmt.Sprintf("mode=%s n=%d model=%s ckpt=%s", c.mode, c.n, c.model, c.ckpt)
		if !matches(key, *only) {
			continue
		}
		rss, wall, line, err := child(self, append([]string{"one"}, c.args()...))
		if err != nil {
			fmt.Printf("flowrun %s FAILED (%v)\n", key, err)
			failed++
			continue
		}
		fmt.Printf("flowrun %s peak_rss_kb=%d proc_wall_s=%.2f\n", line, rss, wall)
	}
	if failed > 0 {
		return 1
	}
	return 0
}

func matches(line, only string) bool {
	for w := range strings.SplitSeq(only, ",") {
		if w != "" && !strings.Contains(line+" ", w+" ") {
			return false
		}
	}
	return true
}

// child runs the bench binary with args and returns its peak RSS in KiB,
// its wall time in seconds and the last line it printed.
func child(self string, args []string) (rssKB int64, wall float64, line string, err error) {
	cmd := exec.Command(self, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	start := time.Now()
	err = cmd.Run()
	wall = time.Since(start).Seconds()
	if err != nil {
		return 0, wall, "", err
	}
	return procstat.PeakRSSKB(cmd.ProcessState), wall, strings.TrimSpace(out.String()), nil
}

// one runs one configuration in this process: a cold run, then the warm
// runs, and prints its line (without peak_rss_kb, which the parent adds).
func one(args []string) int {
	fs := flag.NewFlagSet("bench one", flag.ExitOnError)
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the warm runs to `file`")
	memprofile := fs.String("memprofile", "", "write an allocation profile of the warm runs to `file`")
	conc := fs.Int("concurrency", 0, "the fan-out's max_concurrency (default: K, every branch in flight at once)")
	// Flags may come after the positional arguments.
	var pos []string
	for len(args) > 0 {
		_ = fs.Parse(args)
		args = fs.Args()
		if len(args) > 0 {
			pos, args = append(pos, args[0]), args[1:]
		}
	}
	if len(pos) != 5 {
		fmt.Fprintln(os.Stderr, "usage: bench one loop|fanout N fn|fakelist none|memory|sqlite REPEATS [-cpuprofile FILE]")
		return 2
	}
	n, err1 := strconv.Atoi(pos[1])
	repeats, err2 := strconv.Atoi(pos[4])
	if err1 != nil || err2 != nil || n < 1 || repeats < 0 {
		fmt.Fprintln(os.Stderr, "bench one: N and REPEATS are numbers")
		return 2
	}
	c := config{mode: pos[0], n: n, model: pos[2], ckpt: pos[3], repeats: repeats}
	line, err := measure(c, *conc, *cpuprofile, *memprofile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench one %s: %v\n", strings.Join(pos, " "), err)
		return 1
	}
	fmt.Println(line)
	return 0
}

func measure(c config, conc int, cpuprofile, memprofile string) (string, error) {
	dir, err := os.MkdirTemp("", "flowrun-bench-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	src, inputs, err := pipeline(c, conc)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, c.mode+".yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		return "", err
	}
	tb := time.Now()
	p, ds := dsl.Load(path)
	buildMS := msSince(tb)
	if p == nil {
		return "", fmt.Errorf("loading the pipeline:\n%s", ds)
	}
	doubles, err := modelDoubles(c.model)
	if err != nil {
		return "", err
	}
	b := &bencher{c: c, p: p, doubles: doubles, inputs: inputs, dir: dir}
	if b.memory, err = newEngine(nil); err != nil {
		return "", err
	}
	defer b.memory.Close()

	cold, ckpts, err := b.run(true)
	if err != nil {
		return "", err
	}
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return "", err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return "", err
		}
	}
	if memprofile != "" {
		goruntime.MemProfileRate = 4096
	}
	var warm, cpu []float64
	for range c.repeats {
		c0 := procstat.CPUTime()
		ms, _, err := b.run(false)
		if err != nil {
			return "", err
		}
		warm = append(warm, ms)
		cpu = append(cpu, float64((procstat.CPUTime()-c0).Microseconds())/1000)
	}
	if cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	if memprofile != "" {
		f, err := os.Create(memprofile)
		if err != nil {
			return "", err
		}
		defer f.Close()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			return "", err
		}
	}
	if len(warm) == 0 {
		warm = append(warm, cold)
		cpu = append(cpu, 0)
	}
	med, low := median(warm), slices.Min(warm)
	unit, per := "steps", "step"
	if c.mode == "fanout" {
		unit, per = "branches", "branch"
	}
	return strings.Join([]string{
		"mode=" + c.mode, "n=" + strconv.Itoa(c.n), "model=" + c.model, "ckpt=" + c.ckpt,
		"checkpoints_per_run=" + strconv.Itoa(ckpts),
		"build_ms=" + f2(buildMS),
		"cold_ms=" + f2(cold),
		"warm_med_ms=" + f2(med), "warm_min_ms=" + f2(low), "repeats=" + strconv.Itoa(c.repeats),
		unit + "_per_s=" + f2(float64(c.n)/med*1000),
		"us_per_" + per + "=" + f2(med*1000/float64(c.n)),
		// The CPU time (all threads, GC included) of the median warm run's
		// process per step: on a shared machine it moves less than the wall time.
		"cpu_us_per_" + per + "=" + f2(median(cpu)*1000/float64(c.n)),
	}, " "), nil
}

// pipeline is the YAML source of a configuration's graph and its inputs.
//
// loop: one llm node per iteration, whose set: counts and keeps the reply,
// and the loop's until: condition: the peer's node and conditional edge.
// fanout: a map over K items, each running one llm node, all in flight at
// once (the peer's K Sends), whose results are joined into a list; a set
// node counts them (the peer's join node).
func pipeline(c config, conc int) (string, map[string]any, error) {
	const models = `models:
  default: {model: gpt-4.1-mini, base_url: "http://model.bench.invalid/v1"}
`
	switch c.mode {
	case "loop":
		return fmt.Sprintf(`version: 1
name: bench-loop
inputs:
  n: {type: integer, minimum: 1}
%sstate: {counter: 0, out: ""}
nodes:
  - id: steps
    loop:
      max_iterations: %d
      until: state.counter >= inputs.n
      on_exhausted: fail
      body:
        - id: llm
          llm: {prompt: "step ${{ state.counter }}"}
          set: {counter: state.counter + 1, out: nodes.llm.text}
outputs: {counter: state.counter, out: state.out}
`, models, c.n), map[string]any{"n": c.n}, nil
	case "fanout":
		if conc <= 0 {
			conc = c.n
		}
		return fmt.Sprintf(`version: 1
name: bench-fanout
inputs:
  k: {type: integer, minimum: 1}
%sstate: {joined: 0}
nodes:
  - id: fan
    map:
      over: 0..(inputs.k - 1)
      max_concurrency: %d
      body:
        - id: worker
          llm: {prompt: "branch ${{ item }}"}
      result: string(item) + ":" + nodes.worker.text
  - id: join
    set: {joined: len(nodes.fan)}
outputs: {joined: state.joined, results: nodes.fan}
`, models, conc), map[string]any{"k": c.n}, nil
	}
	return "", nil, fmt.Errorf("unknown mode %q (loop or fanout)", c.mode)
}

type bencher struct {
	c       config
	p       *dsl.Pipeline
	doubles *engine.Doubles
	memory  *engine.Engine // the runs kept in memory
	inputs  map[string]any
	dir     string
	runs    int
}

// newEngine is the engine of the runs: no environment read, and one try
// per model call, as the peer makes.
func newEngine(st *store.Store) (*engine.Engine, error) {
	return engine.New(engine.Options{Store: st, MaxAttempts: 1, LookupEnv: func(string) (string, bool) { return "", false }})
}

// run makes one timed run and checks its result. Like the peer, each run
// gets a fresh checkpointer (a fresh SQLite file), set up untimed.
func (b *bencher) run(count bool) (ms float64, ckpts int, err error) {
	ctx := context.Background()
	b.runs++
	var res *runtime.Result
	switch b.c.ckpt {
	case "none", "memory":
		kept := &engine.InMemory{}
		m := &memoryCheckpoints{}
		if b.c.ckpt == "memory" {
			kept.Checkpointer = m
		}
		t0 := time.Now()
		run, err := b.memory.Start(ctx, b.p, b.inputs, engine.RunOptions{Doubles: b.doubles, InMemory: kept})
		if err != nil {
			return 0, 0, err
		}
		res = run.Wait()
		ms = msSince(t0)
		ckpts = m.count()
	case "sqlite":
		st, err := store.Open(filepath.Join(b.dir, fmt.Sprintf("runs-%d.db", b.runs)))
		if err != nil {
			return 0, 0, err
		}
		defer st.Close()
		e, err := newEngine(st)
		if err != nil {
			return 0, 0, err
		}
		defer e.Close()
		t0 := time.Now()
		run, err := e.Start(ctx, b.p, b.inputs, engine.RunOptions{Doubles: b.doubles})
		if err != nil {
			return 0, 0, err
		}
		res = run.Wait()
		ms = msSince(t0)
		if count {
			cps, err := st.Checkpoints(ctx, res.RunID, 0)
			if err != nil {
				return 0, 0, err
			}
			ckpts = len(cps)
		}
	default:
		return 0, 0, fmt.Errorf("unknown checkpointer %q (none, memory or sqlite)", b.c.ckpt)
	}
	if res.Status != runtime.StatusCompleted {
		return 0, 0, fmt.Errorf("run %s: %s %v %s", res.RunID, res.Status, res.Err, res.Reason)
	}
	return ms, ckpts, b.check(res.Outputs)
}

func (b *bencher) check(out map[string]any) error {
	switch b.c.mode {
	case "loop":
		if out["counter"] != b.c.n || out["out"] != answer {
			return fmt.Errorf("outputs %v: want counter %d", out, b.c.n)
		}
	case "fanout":
		results, _ := out["results"].([]any)
		if out["joined"] != b.c.n || len(results) != b.c.n {
			return fmt.Errorf("joined=%v results=%d, want %d", out["joined"], len(results), b.c.n)
		}
		if want := strconv.Itoa(b.c.n-1) + ":" + answer; results[b.c.n-1] != want {
			return fmt.Errorf("last result %v, want %s", results[b.c.n-1], want)
		}
	}
	return nil
}

// memoryCheckpoints keeps checkpoints in memory, encoded as the SQLite
// store encodes them (the peer's MemorySaver serialises too).
type memoryCheckpoints struct {
	mu   sync.Mutex
	data [][]byte
}

func (m *memoryCheckpoints) Save(_ context.Context, cp *runtime.Checkpoint) error {
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.data = append(m.data, b)
	m.mu.Unlock()
	return nil
}

func (m *memoryCheckpoints) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.data)
}

const answer = "fixed answer"

// modelDoubles stand in for the model as the configuration's model says:
// the llm kind answered by instantModel, or the model client's requests
// answered in process.
func modelDoubles(model string) (*engine.Doubles, error) {
	switch model {
	case "fn":
		return &engine.Doubles{Kinds: func(kinds runtime.Registry) runtime.Registry {
			kinds[dsl.KindLLM] = instantModel{}
			return kinds
		}}, nil
	case "fakelist":
		return &engine.Doubles{HTTPClient: &http.Client{Transport: fakeOpenAI{}}}, nil
	}
	return nil, fmt.Errorf("unknown model %q (fn or fakelist)", model)
}

// instantModel answers every llm node at once: it renders the prompt, as
// the peer's node builds its prompt string, and returns a fixed text.
type instantModel struct{}

func (instantModel) Execute(_ context.Context, s *runtime.Scope, n *dsl.Node) (runtime.Outcome, error) {
	if _, err := s.Render(n.LLM().Prompt); err != nil {
		return runtime.Outcome{}, err
	}
	return runtime.Outcome{Output: map[string]any{"text": answer}}, nil
}

// fakeOpenAI answers every request with one chat completion in the OpenAI
// wire format, in process: the request is read and the reply parsed by
// openai-go as over a network, but no socket is opened.
type fakeOpenAI struct{}

var completion = []byte(`{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"gpt-4.1-mini",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"` + answer + `","refusal":null},"logprobs":null,"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":8,"completion_tokens":2,"total_tokens":10,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},` +
	`"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},` +
	`"system_fingerprint":"fp_bench"}`)

func (fakeOpenAI) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	if !strings.HasSuffix(req.URL.Path, "/chat/completions") {
		return nil, fmt.Errorf("fake model: unexpected path %s", req.URL.Path)
	}
	return &http.Response{
		Status: "200 OK", StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(completion)),
		ContentLength: int64(len(completion)),
		Request:       req,
	}, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Nanoseconds()) / 1e6 }

func f2(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return goruntime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return goruntime.GOARCH
}

func memTotalKB() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
