package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/cluster"
	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/internal/testwait"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// natsEndpoint is what the workers and the coordinator connect to: one
// server or a cluster.
type natsEndpoint interface {
	url() string // the --nats value
	// flags are the credentials flags of a role: "coordinator" or "worker".
	flags(role string) []string
	jetStream() jetstream.JetStream
}

// natsServer is an embedded JetStream server with file storage, which a
// test can restart on the same port and directory. A locked-down one
// lets in only the admin, coordinator and worker users, each with the
// permissions cluster.Permissions gives its role.
type natsServer struct {
	t     testing.TB
	dir   string
	port  int
	srv   *server.Server
	users []*server.NkeyUser
	seeds map[string]string // role -> nkey seed file
}

func startNATS(t testing.TB) *natsServer {
	n := &natsServer{t: t, dir: t.TempDir(), port: server.RANDOM_PORT}
	n.start()
	n.port = n.srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(func() { n.srv.Shutdown(); n.srv.WaitForShutdown() })
	return n
}

// startLockedNATS starts a locked-down server and sets flowrun up on it
// with `flowrun cluster setup` and the admin credential.
func startLockedNATS(t *testing.T, setupArgs ...string) *natsServer {
	n := &natsServer{t: t, dir: t.TempDir(), port: server.RANDOM_PORT, seeds: map[string]string{}}
	seedDir := t.TempDir()
	for _, role := range cluster.Roles {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := kp.PublicKey()
		seed, _ := kp.Seed()
		n.seeds[string(role)] = filepath.Join(seedDir, string(role)+".nk")
		if err := os.WriteFile(n.seeds[string(role)], seed, 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := cluster.Permissions(role)
		if err != nil {
			t.Fatal(err)
		}
		n.users = append(n.users, &server.NkeyUser{Nkey: pub, Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Allow: p.Pub.Allow, Deny: p.Pub.Deny}, Subscribe: &server.SubjectPermission{Allow: p.Sub.Allow}}})
	}
	n.start()
	n.port = n.srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(func() { n.srv.Shutdown(); n.srv.WaitForShutdown() })
	code, stdout, stderr := flowrun(t, append([]string{"cluster", "setup", "--nats", n.url()}, append(n.flags("admin"), setupArgs...)...)...)
	if code != exitOK {
		t.Fatalf("flowrun cluster setup: exit %d\n%s%s", code, stdout, stderr)
	}
	return n
}

func (n *natsServer) start() {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: n.port, JetStream: true, StoreDir: n.dir, NoLog: true, NoSigs: true, Nkeys: n.users})
	if err != nil {
		n.t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(20 * time.Second) {
		n.t.Fatal("the NATS server did not start")
	}
	n.srv = s
}

func (n *natsServer) restart() {
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
	n.start()
}

func (n *natsServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

func (n *natsServer) flags(role string) []string {
	if n.seeds == nil {
		return nil
	}
	return []string{"--nats-creds", n.seeds[role]}
}

// connect is a client of the test's own, as role on a locked-down server.
func (n *natsServer) connect(role string, opts ...nats.Option) (*nats.Conn, error) {
	if n.seeds != nil && role != "" {
		nk, err := nats.NkeyOptionFromSeed(n.seeds[role])
		if err != nil {
			return nil, err
		}
		opts = append(opts, nk)
	}
	return nats.Connect(n.url(), opts...)
}

// jetStream is a client of the test's own (the admin, on a locked-down
// server), to look at what flowrun stored.
func (n *natsServer) jetStream() jetstream.JetStream {
	nc, err := n.connect("admin")
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		n.t.Fatal(err)
	}
	return js
}

// startWorker starts flowrun worker as a subprocess with its own API key,
// so that the fake model tells its requests apart; it is killed when the
// test ends.
func startWorker(t *testing.T, model *durModel, key, url string, extra ...string) *durProc {
	args := append(append([]string{"worker", "--nats", url, "--concurrency", "2", "--ack-wait", "3s", "--cache-dir", t.TempDir()}, workerKeys(t)...), extra...)
	var p *durProc
	// Registered first, so run after p is killed and reaped.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("worker %s:\n%s", key, p.stderr())
		}
	})
	p = startDurProc(t, model.env(key), args...)
	return p
}

// clusterKeyDir holds the keys of every cluster test, made once with
// cluster.GenerateKey beside the tests' store (TestMain removes it).
var clusterKeyDir = sync.OnceValues(func() (string, error) {
	dir := filepath.Join(filepath.Dir(os.Getenv("FLOWRUN_STORE")), "cluster-keys")
	for _, name := range []string{"coordinator", "worker"} {
		if _, _, err := cluster.GenerateKey(dir, name); err != nil {
			return "", err
		}
	}
	return dir, nil
})

func keyFile(t testing.TB, name string) string {
	t.Helper()
	dir, err := clusterKeyDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

// workerKeys are the flags of a worker that trusts the tests'
// coordinator key and signs with the tests' worker key.
func workerKeys(t testing.TB) []string {
	return []string{"--nats-trust", keyFile(t, "coordinator.pub"), "--nats-sign", keyFile(t, "worker.key")}
}

// coordinatorKeys are the flags of a coordinator that signs with the
// tests' coordinator key and trusts the tests' worker key.
func coordinatorKeys(t testing.TB) []string {
	return []string{"--nats-sign", keyFile(t, "coordinator.key"), "--nats-trust-worker", keyFile(t, "worker.pub")}
}

// clusterItems writes a dataset of n items for killBatchPipeline.
func clusterItems(t *testing.T, dir string, n int) string {
	var lines []string
	for i := 1; i <= n; i++ {
		lines = append(lines, fmt.Sprintf(`{"id": "i%d"}`, i))
	}
	return writeFile(t, dir, "items.jsonl", strings.Join(lines, "\n"))
}

var summaryLine = regexp.MustCompile(`(?m)^completed: .*$`)

// localBaseline runs the batch in one process: what the workers must match.
func localBaseline(t *testing.T, model *durModel, pipeline, data string, items int) (batchRecord, string) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "local.db")
	code, _, stderr := runDurProc(t, model.env("sk-local"), "batch", pipeline, "--dataset", data, "--store", db)
	if code != exitOK {
		t.Fatalf("local batch: exit %d\n%s", code, stderr)
	}
	rec := readBatchRecord(t, db)
	if len(rec.outputs) != items {
		t.Fatalf("local batch: %d outputs for %d items", len(rec.outputs), items)
	}
	return rec, summaryLine.FindString(stderr)
}

// checkMirrored checks the coordinator's store against the local batch.
func checkMirrored(t *testing.T, db string, want batchRecord, items int) {
	t.Helper()
	got := readBatchRecord(t, db)
	if got.runs != items {
		t.Errorf("%d runs mirrored for %d items", got.runs, items)
	}
	for id, out := range want.outputs {
		if got.status[id] != runtime.StatusCompleted || got.outputs[id] != out {
			t.Errorf("item %s: %s with output %q, want completed with %q", id, got.status[id], got.outputs[id], out)
		}
		for _, node := range []string{"a", "b"} {
			if !got.finished[id+"/"+node] {
				t.Errorf("item %s: node %s has no checkpoint in the coordinator's store", id, node)
			}
		}
	}
}

// checkClusterBatch checks the coordinator's store against the local
// batch, and that JetStream holds exactly one result per item.
func checkClusterBatch(t *testing.T, js jetstream.JetStream, db string, want batchRecord, items int) {
	t.Helper()
	checkMirrored(t, db, want, items)
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, "flowrun-results")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := lastBatch(t, db)
	keys, err := kv.ListKeysFiltered(ctx, b.ID+".>")
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]bool{}
	for k := range keys.Keys() {
		results[k[:strings.LastIndexByte(k, '.')]] = true // <batch>.<index>.<signer>
		h, err := kv.History(ctx, k)
		if err != nil || len(h) != 1 {
			t.Errorf("result %s: %d values (%v), want exactly one", k, len(h), err)
		}
	}
	if n := len(results); n != items {
		t.Errorf("%d results in JetStream for %d items", n, items)
	}
}

// TestClusterBatchThreeWorkers: a batch published to NATS and run by three
// worker processes ends with one result per item, the same outputs and
// summary as the same batch run locally, and the coordinator's store
// holds every run as a local batch's would.
func TestClusterBatchThreeWorkers(t *testing.T) {
	c := startClusterBatch(t, 12, 3, 10*time.Millisecond)
	c.finish(t, c.coord)
	per := map[string]int{}
	for i := range 3 {
		key := fmt.Sprintf("sk-worker-%d", i)
		per[key] = len(c.model.paths(key))
	}
	t.Logf("model calls per worker: %v", per)
	code, stdout, stderr := flowrunIn(t, c.db, "batch", "show", "last", "--format", "json")
	if code != exitOK || !strings.Contains(stdout, `"completed"`) {
		t.Fatalf("batch show: exit %d\n%s%s", code, stdout, stderr)
	}
}

// lastBatch is the last batch in store db, with its items.
func lastBatch(t *testing.T, db string) (*store.Batch, []*store.BatchItem) {
	t.Helper()
	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	return lastBatchIn(t, st)
}

// lastBatchIn is the last batch in the open store st, with its items.
func lastBatchIn(t *testing.T, st *store.Store) (*store.Batch, []*store.BatchItem) {
	t.Helper()
	ctx := context.Background()
	b, err := st.FindBatch(ctx, "last")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := st.BatchItems(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	return b, rows
}

// itemRuns maps the last batch's item ids to their runs.
func itemRuns(t *testing.T, db string) map[string]string {
	_, rows := lastBatch(t, db)
	out := map[string]string{}
	for _, r := range rows {
		out[fmt.Sprint(r.Item["id"])] = r.Run
	}
	return out
}

// clusterBatch is a batch of killBatchPipeline items running on workers
// through an embedded NATS server, with what the same batch gave locally.
type clusterBatch struct {
	t        *testing.T
	items    int
	pipeline string
	data     string
	model    *durModel
	ns       natsEndpoint
	want     batchRecord
	summary  string
	db       string
	coord    *durProc
	workers  []*durProc
	requests chan struct{} // one per model request from a worker
}

// startClusterBatch runs the batch locally, then starts the NATS server,
// the workers (whose model answers after delay; workerArgs are added to
// their flags) and the coordinator.
func startClusterBatch(t *testing.T, items, workers int, delay time.Duration, workerArgs ...string) *clusterBatch {
	c := startClusterWorkers(t, items, workers, delay, workerArgs...)
	c.coord = c.startCoordinator()
	return c
}

// startClusterWorkers is startClusterBatch without the coordinator.
func startClusterWorkers(t *testing.T, items, workers int, delay time.Duration, workerArgs ...string) *clusterBatch {
	return startClusterWorkersOn(t, startNATS(t), items, workers, delay, workerArgs...)
}

// startClusterWorkersOn is startClusterWorkers against ns.
func startClusterWorkersOn(t *testing.T, ns natsEndpoint, items, workers int, delay time.Duration, workerArgs ...string) *clusterBatch {
	dir := t.TempDir()
	c := &clusterBatch{t: t, items: items, model: newDurModel(t), requests: make(chan struct{}, 1000), ns: ns}
	c.pipeline = writeFile(t, dir, "kill.yaml", killBatchPipeline)
	c.data = clusterItems(t, dir, items)
	c.want, c.summary = localBaseline(t, c.model, c.pipeline, c.data, items)
	for i := range workers {
		key := fmt.Sprintf("sk-worker-%d", i)
		c.model.hook(key, func(int, string) llmtest.Reply {
			c.requests <- struct{}{}
			return llmtest.Reply{Delay: delay}
		})
		c.workers = append(c.workers, startWorker(t, c.model, key, c.ns.url(), append(c.ns.flags("worker"), workerArgs...)...))
	}
	c.db = filepath.Join(t.TempDir(), "coord.db")
	return c
}

// startCoordinator starts flowrun batch --nats; it needs no model
// endpoint: the workers call the model.
func (c *clusterBatch) startCoordinator(args ...string) *durProc {
	return startDurProc(c.t, nil, append(append(append([]string{"batch", c.pipeline, "--dataset", c.data, "--nats", c.ns.url(), "--store", c.db},
		coordinatorKeys(c.t)...), c.ns.flags("coordinator")...), args...)...)
}

// workerCalls are the model calls the workers made.
func (c *clusterBatch) workerCalls() []durCall {
	c.model.mu.Lock()
	defer c.model.mu.Unlock()
	var out []durCall
	for _, call := range c.model.calls {
		if strings.HasPrefix(call.key, "sk-worker-") {
			out = append(out, call)
		}
	}
	return out
}

// itemCost is what an item costs when the model answers as usual, from
// a local batch.
func (c *clusterBatch) itemCost() float64 {
	c.t.Helper()
	local := filepath.Join(c.t.TempDir(), "local.db")
	if code, _, stderr := runDurProc(c.t, c.model.env("sk-local"), "batch", c.pipeline, "--dataset", c.data, "--store", local); code != exitOK {
		c.t.Fatalf("local batch: exit %d\n%s", code, stderr)
	}
	_, rows := lastBatch(c.t, local)
	if rows[0].CostUSD <= 0 {
		c.t.Fatalf("an item of the local batch cost %v: the budget cannot trip", rows[0].CostUSD)
	}
	return rows[0].CostUSD
}

// waitRequests waits for n model requests from the workers.
func (c *clusterBatch) waitRequests(n int) {
	for range n {
		select {
		case <-c.requests:
		case <-time.After(durDeadline):
			c.t.Fatalf("no model request\n%s", c.coord.abort())
		}
	}
}

// finish waits for the coordinator p (flowrun batch or batch resume) and
// checks the batch against the local one.
func (c *clusterBatch) finish(t *testing.T, p *durProc) {
	t.Helper()
	if code := p.wait(); code != exitOK || summaryLine.FindString(p.stderr()) != c.summary {
		t.Fatalf("flowrun %s: exit %d, want the summary %q\n%s", strings.Join(p.args, " "), code, c.summary, p.stderr())
	}
	checkClusterBatch(t, c.ns.jetStream(), c.db, c.want, c.items)
}

// eachCallOnce checks that the workers asked the model once for each
// node; why says what a repeat means.
func (c *clusterBatch) eachCallOnce(t *testing.T, why string) {
	t.Helper()
	seen := map[string]int{}
	c.model.mu.Lock()
	defer c.model.mu.Unlock()
	for _, call := range c.model.calls {
		if strings.HasPrefix(call.key, "sk-worker-") {
			if seen[call.path]++; seen[call.path] > 1 {
				t.Errorf("model asked twice for %s: %s", call.path, why)
			}
		}
	}
}

// flowrunIn runs a flowrun command in process against store db.
func flowrunIn(t *testing.T, db string, args ...string) (int, string, string) {
	t.Helper()
	t.Setenv("FLOWRUN_STORE", db)
	return flowrun(t, args...)
}

// storedCheckpoints are the (run, node path) pairs whose checkpoint
// JetStream holds now.
func storedCheckpoints(t *testing.T, js jetstream.JetStream) map[string]bool {
	t.Helper()
	// Right after a cluster starts, or a server is lost, the JetStream API
	// may not answer yet ("no responders", or no answer at all to a
	// request a new leader dropped): to the consumer's creation, to the
	// first question put to it, or to its first pull, before the new
	// consumer's subscription has reached every server (CI once failed
	// there). Read again from a new consumer, 5 s an attempt, until one
	// read goes through.
	var out map[string]bool
	var err error
	for deadline := time.Now().Add(durDeadline); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if out, err = readCheckpoints(js); err == nil {
			return out
		}
	}
	t.Fatal(err)
	return nil
}

// readCheckpoints is one attempt of storedCheckpoints.
func readCheckpoints(js jetstream.JetStream) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, "FLOWRUN_RUNS", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"flowrun.cp.>"}})
	if err != nil {
		return nil, err
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for left := int(info.NumPending); left > 0; {
		msgs, err := cons.Fetch(left, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, err
		}
		for m := range msgs.Messages() {
			var cp runtime.Checkpoint
			if err := json.Unmarshal(m.Data(), &cp); err != nil {
				return nil, err
			}
			out[strings.TrimPrefix(m.Subject(), "flowrun.cp.")+"/"+cp.Path] = true
			left--
		}
		if msgs.Error() != nil {
			return nil, msgs.Error()
		}
	}
	return out, nil
}

const clusterKills = 10

// TestClusterWorkerKills kills workers with SIGKILL at random points
// (after the k-th model request, then a random delay) while a batch runs,
// starting a fresh worker for each one killed: the batch completes with
// one result per item and the outputs of a local batch, and no model
// call whose node's checkpoint was stored before a kill is made again.
func TestClusterWorkerKills(t *testing.T) {
	dir := t.TempDir()
	pipeline := writeFile(t, dir, "kill.yaml", killBatchPipeline)
	const items = 16
	data := clusterItems(t, dir, items)
	model := newDurModel(t)
	want, summary := localBaseline(t, model, pipeline, data, items)

	seed := *killSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("%d kill points, seed %d (rerun with -kill-seed=%d)", clusterKills, seed, seed)
	rng := mrand.New(mrand.NewPCG(seed, 0xc1a5))

	ns := startNATS(t)
	js := ns.jetStream()
	var mu sync.Mutex
	requests := 0
	arrived := make(chan int, 1000)
	delay := func(int, string) llmtest.Reply {
		mu.Lock()
		requests++
		n := requests
		mu.Unlock()
		arrived <- n
		return llmtest.Reply{Delay: 20 * time.Millisecond}
	}
	workers := map[string]*durProc{}
	next := 0
	spawn := func() {
		key := fmt.Sprintf("sk-worker-%d", next)
		next++
		model.hook(key, delay)
		workers[key] = startWorker(t, model, key, ns.url())
	}
	for range 3 {
		spawn()
	}
	db := filepath.Join(t.TempDir(), "coord.db")
	coord := startDurProc(t, model.env("sk-coord"), append([]string{"batch", pipeline, "--dataset", data, "--nats", ns.url(), "--store", db}, coordinatorKeys(t)...)...)

	type kill struct {
		at       time.Time
		finished map[string]bool // run/path stored when the worker died
	}
	var kills []kill
	threshold := 0
	for len(kills) < clusterKills {
		threshold += 1 + rng.IntN(4)
		reached := false
		for !reached {
			select {
			case n := <-arrived:
				reached = n >= threshold
			case <-coord.exited():
				t.Fatalf("the batch ended after %d kills; raise items\n%s", len(kills), coord.stderr())
			case <-time.After(durDeadline):
				t.Fatalf("no model request for %s\n%s", durDeadline, coord.abort())
			}
		}
		time.Sleep(time.Duration(rng.Float64() * float64(40*time.Millisecond)))
		var keys []string
		for k := range workers {
			keys = append(keys, k)
		}
		victim := keys[rng.IntN(len(keys))]
		workers[victim].kill()
		<-workers[victim].exited()
		delete(workers, victim)
		kills = append(kills, kill{at: time.Now(), finished: storedCheckpoints(t, js)})
		spawn()
	}
	if code := coord.wait(); code != exitOK || summaryLine.FindString(coord.stderr()) != summary {
		t.Fatalf("batch --nats: exit %d, want the summary %q\n%s", code, summary, coord.stderr())
	}
	checkClusterBatch(t, js, db, want, items)

	runOf := itemRuns(t, db)
	model.mu.Lock()
	calls := append([]durCall(nil), model.calls...)
	model.mu.Unlock()
	repeats := 0
	seen := map[string]int{}
	for _, c := range calls {
		if c.key == "sk-local" {
			continue
		}
		id, node, _ := strings.Cut(c.path, "/")
		if seen[c.path]++; seen[c.path] > 1 {
			repeats++
		}
		for _, k := range kills {
			if c.at.After(k.at) && k.finished[runOf[id]+"/"+node] {
				t.Errorf("model asked again for %s at %s: its checkpoint was stored before the kill at %s", c.path, c.at.Format("15:04:05.000"), k.at.Format("15:04:05.000"))
				break
			}
		}
	}
	t.Logf("%d model calls redone (in flight at a kill), %d kills", repeats, len(kills))
}

// TestClusterNATSRestart restarts the NATS server (file storage) in the
// middle of a batch: workers and coordinator reconnect and the batch
// completes with one result per item.
func TestClusterNATSRestart(t *testing.T) {
	c := startClusterBatch(t, 12, 2, 30*time.Millisecond)
	c.waitRequests(6)
	c.ns.(*natsServer).restart()
	c.finish(t, c.coord)
}

// TestClusterSharedRateBudget: a model's rpm and max_concurrency hold
// across three workers, as the fake model measures them: requests are
// spaced by the rpm's share of a minute, and with max_concurrency 1 no
// two requests are in flight at once.
func TestClusterSharedRateBudget(t *testing.T) {
	dir := t.TempDir()
	const items = 8
	data := clusterItems(t, dir, items)
	model := newDurModel(t)
	ns := startNATS(t)
	var delay atomic.Int64
	delay.Store(int64(10 * time.Millisecond))
	for i := range 3 {
		key := fmt.Sprintf("sk-worker-%d", i)
		model.hook(key, func(int, string) llmtest.Reply { return llmtest.Reply{Delay: time.Duration(delay.Load())} })
		startWorker(t, model, key, ns.url())
	}
	workerCalls := func() []durCall {
		model.mu.Lock()
		defer model.mu.Unlock()
		var out []durCall
		for _, c := range model.calls {
			if strings.HasPrefix(c.key, "sk-worker-") {
				out = append(out, c)
			}
		}
		model.calls = nil
		return out
	}
	run := func(limits string) []durCall {
		t.Helper()
		pipeline := writeFile(t, dir, "limited.yaml", strings.Replace(killBatchPipeline,
			"models: {default: {model: gpt-4.1-mini}}", "models: {default: {model: gpt-4.1-mini, "+limits+"}}", 1))
		db := filepath.Join(t.TempDir(), "coord.db")
		code, _, stderr := runDurProc(t, model.env("sk-coord"), append([]string{"batch", pipeline, "--dataset", data, "--nats", ns.url(), "--store", db}, coordinatorKeys(t)...)...)
		if code != exitOK {
			t.Fatalf("batch --nats with %s: exit %d\n%s", limits, code, stderr)
		}
		calls := workerCalls()
		if len(calls) != 2*items {
			t.Fatalf("%d model calls, want %d", len(calls), 2*items)
		}
		return calls
	}

	const rpm = 1200 // one request every 50ms
	calls := run(fmt.Sprintf("rpm: %d", rpm))
	// The requests after the first need their shares of the minute: 750ms
	// for 16 when the workers share the budget, a third of that when each
	// paces alone. The test tells the two apart halfway between, not by
	// the spacing of neighbours, which a loaded machine's delays between
	// the limiter and the server blur.
	shared := time.Duration(len(calls)-1) * time.Minute / rpm
	if span := calls[len(calls)-1].at.Sub(calls[0].at); span < shared*2/3 {
		t.Errorf("rpm %d: %d requests arrived within %s, want about %s (the workers do not share the budget)", rpm, len(calls), span, shared)
	}

	delay.Store(int64(40 * time.Millisecond))
	calls = run("max_concurrency: 1")
	for i := 1; i < len(calls); i++ {
		if calls[i].at.Before(calls[i-1].replied) {
			t.Errorf("max_concurrency 1: request %d (%s) arrived before request %d (%s) was answered", i+1, calls[i].key, i, calls[i-1].key)
		}
	}
}

// noRedelivery is an --ack-wait longer than any wait of the tests.
const noRedelivery = "2h"

// TestClusterWorkerSIGTERM: a worker sent SIGTERM in the middle of its
// items stops fetching, hands its items back and exits 0 at once, without
// waiting for its AckWait; another worker resumes those items from their
// checkpoints and the batch completes.
func TestClusterWorkerSIGTERM(t *testing.T) {
	dir := t.TempDir()
	pipeline := writeFile(t, dir, "kill.yaml", killBatchPipeline)
	const items = 4
	data := clusterItems(t, dir, items)
	model := newDurModel(t)
	ns := startNATS(t)
	replied := make(chan struct{}, 100)
	model.hook("sk-first", func(int, string) llmtest.Reply {
		go func() { time.Sleep(200 * time.Millisecond); replied <- struct{}{} }()
		return llmtest.Reply{Delay: 150 * time.Millisecond}
	})
	first := startDurProc(t, model.env("sk-first"), append([]string{"worker", "--nats", ns.url(), "--concurrency", "2", "--ack-wait", noRedelivery, "--cache-dir", t.TempDir()}, workerKeys(t)...)...)
	db := filepath.Join(t.TempDir(), "coord.db")
	coord := startDurProc(t, model.env("sk-coord"), append([]string{"batch", pipeline, "--dataset", data, "--nats", ns.url(), "--store", db}, coordinatorKeys(t)...)...)
	select {
	case <-replied:
	case <-time.After(durDeadline):
		t.Fatalf("no model reply\n%s", coord.abort())
	}
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := first.wait(); code != exitOK || !strings.Contains(first.stderr(), "handed back") {
		t.Fatalf("worker after SIGTERM: exit %d\n%s", code, first.stderr())
	}
	finished := storedCheckpoints(t, ns.jetStream())
	model.hook("sk-second", func(int, string) llmtest.Reply { return llmtest.Reply{} })
	startDurProc(t, model.env("sk-second"), append([]string{"worker", "--nats", ns.url(), "--ack-wait", noRedelivery, "--cache-dir", t.TempDir()}, workerKeys(t)...)...)
	// No item is redelivered before the test gives up waiting: a batch
	// that completes had its items handed back.
	if code := coord.wait(); code != exitOK || !strings.Contains(coord.stderr(), fmt.Sprintf("completed: %d items, %d completed", items, items)) {
		t.Fatalf("batch --nats: exit %d (the items were not handed back?)\n%s", code, coord.stderr())
	}
	runOf := itemRuns(t, db)
	for _, path := range model.paths("sk-second") {
		id, node, _ := strings.Cut(path, "/")
		if finished[runOf[id]+"/"+node] {
			t.Errorf("the second worker asked the model again for %s, finished before the SIGTERM", path)
		}
	}
	if len(model.paths("sk-second")) == 0 {
		t.Errorf("the second worker ran nothing: the first finished every item despite SIGTERM\n%s", first.stderr())
	}
}

// TestClusterCoordinatorResume kills the coordinator (flowrun batch
// --nats) mid-batch while the workers go on; flowrun batch resume picks
// the batch up from NATS (the URL it recorded), queues no item twice,
// collects the results the workers recorded meanwhile and ends with the
// local batch's outputs, one run per item.
func TestClusterCoordinatorResume(t *testing.T) {
	c := startClusterBatch(t, 12, 2, 20*time.Millisecond)
	c.waitRequests(8)
	c.coord.kill()
	<-c.coord.exited()
	c.finish(t, startDurProc(t, nil, "batch", "resume", "last", "--store", c.db))
	c.eachCallOnce(t, "an item was queued twice")
}

// TestClusterMisconfiguredWorkerHandsBack: a worker that cannot run the
// pipeline (no model endpoint in its environment) hands the items back
// instead of failing them; a worker that can runs them all.
func TestClusterMisconfiguredWorkerHandsBack(t *testing.T) {
	dir := t.TempDir()
	pipeline := writeFile(t, dir, "kill.yaml", killBatchPipeline)
	const items = 4
	data := clusterItems(t, dir, items)
	model := newDurModel(t)
	ns := startNATS(t)
	bad := benchProcess(nil, append([]string{"worker", "--nats", ns.url(), "--cache-dir", t.TempDir()}, workerKeys(t)...)...)
	handedBack := &readyWriter{said: "handing it back", ready: make(chan struct{})}
	bad.Stderr = handedBack
	if err := bad.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bad.Process.Kill(); _ = bad.Wait() })
	db := filepath.Join(t.TempDir(), "coord.db")
	coord := startDurProc(t, model.env("sk-coord"), append([]string{"batch", pipeline, "--dataset", data, "--nats", ns.url(), "--store", db}, coordinatorKeys(t)...)...)
	select {
	case <-handedBack.ready:
	case <-time.After(durDeadline):
		t.Fatalf("the worker with no model endpoint never handed an item back\n%s", coord.abort())
	}
	model.hook("sk-good", func(int, string) llmtest.Reply { return llmtest.Reply{} })
	startWorker(t, model, "sk-good", ns.url())
	if code := coord.wait(); code != exitOK || !strings.Contains(coord.stderr(), fmt.Sprintf("completed: %d items, %d completed, 0 failed", items, items)) {
		t.Fatalf("batch --nats: exit %d\n%s", code, coord.stderr())
	}
}

// TestClusterHeartbeatKeepsLongItems: an item whose model call takes
// longer than the workers' AckWait stays with its worker, which
// heartbeats, instead of being redelivered to another one: every model
// call is made once.
func TestClusterHeartbeatKeepsLongItems(t *testing.T) {
	c := startClusterBatch(t, 2, 2, 1500*time.Millisecond, "--ack-wait", "600ms")
	c.finish(t, c.coord)
	c.eachCallOnce(t, "the item was redelivered while its worker ran it")
}

// TestClusterBudgetStopsAndResumes: --max-cost-usd with --nats stops the
// batch as a local batch does (stopped, with its reason and items left
// without a result) although no window caps the items queued: every
// call reserves from the batch's ledger, the queued items leave the
// work queue on the halt, and no model request comes once the
// coordinator has exited. batch
// resume then finishes it with one result per item and the local
// outputs, asking nothing again whose checkpoint was stored.
func TestClusterBudgetStopsAndResumes(t *testing.T) {
	const items = 12
	c := startClusterWorkers(t, items, 2, 150*time.Millisecond)
	perItem := c.itemCost()
	// Past four items, so that the halt comes while the next four run.
	limit := 5.75 * perItem
	coord := c.startCoordinator("--max-cost-usd", fmt.Sprint(limit))
	if code := coord.wait(); code != exitFailed || !strings.Contains(coord.stderr(), "stopped: the batch's cost cap of ") ||
		!strings.Contains(coord.stderr(), "To continue: flowrun batch resume b") {
		t.Fatalf("batch --nats --max-cost-usd: exit %d\n%s", code, coord.stderr())
	}
	exited := time.Now()
	b, rows := lastBatch(t, c.db)
	done, cut, spent := 0, 0, 0.0
	for _, r := range rows {
		switch {
		case r.Status == runtime.StatusCompleted:
			done++
		case r.Status == runtime.StatusStopped && r.CostUSD > 0:
			cut++
		}
		spent += r.CostUSD
	}
	t.Logf("stopped with %d items completed, %d stopped part-way, $%.6f spent of $%.6f", done, cut, spent, limit)
	if b.Status != runtime.StatusStopped || !batch.StoppedByCap(b.Reason) || done == 0 || done >= items {
		t.Fatalf("batch %s (%s) with %d of %d items completed, want stopped by the budget part-way", b.Status, b.Reason, done, items)
	}
	// Every item is queued at once, yet the workers' calls reserve from
	// one ledger; an item the halt cut short counts with what it spent.
	if spent > limit+perItem {
		t.Errorf("the batch spent $%.6f (%d items cut short), more than the limit $%.6f and one item", spent, cut, limit)
	}
	time.Sleep(2 * time.Second)
	for _, call := range c.workerCalls() {
		if call.at.After(exited.Add(500 * time.Millisecond)) {
			t.Errorf("model asked for %s at %s, after the stopped batch's coordinator exited at %s",
				call.path, call.at.Format("15:04:05.000"), exited.Format("15:04:05.000"))
		}
	}
	finished := storedCheckpoints(t, c.ns.jetStream())
	resumed := time.Now()
	c.finish(t, startDurProc(t, nil, "batch", "resume", "last", "--store", c.db, "--max-cost-usd", "0"))
	runOf := itemRuns(t, c.db)
	for _, call := range c.workerCalls() {
		id, node, _ := strings.Cut(call.path, "/")
		if call.at.After(resumed) && finished[runOf[id]+"/"+node] {
			t.Errorf("batch resume asked the model again for %s, whose checkpoint was stored before the stop", call.path)
		}
	}
}

// TestClusterHaltStopsRunningItems: an item that costs far more than
// the ones before it passes --max-cost-usd while other items run on the
// workers; the halt stops those at once, mid-call, as stopped and
// resumable (no later node runs and no queued item starts), and batch
// resume finishes every item with the local outputs, asking nothing
// again whose checkpoint was stored.
func TestClusterHaltStopsRunningItems(t *testing.T) {
	const items = 8
	c := startClusterWorkers(t, items, 2, 0)
	// Under the cap each call reserves its worst case: with max_tokens set,
	// the calls of i2-i5 fit in the ledger at once, as the halt must find
	// them running (without, each would reserve all that is left).
	c.pipeline = writeFile(t, t.TempDir(), "capped.yaml",
		strings.Replace(killBatchPipeline, "{model: gpt-4.1-mini}", "{model: gpt-4.1-mini, max_tokens: 3}", 1))
	perItem := c.itemCost()
	// The window is the workers' four slots: i1-i4 queued, then i5 once
	// i1 ends. The limit leaves room for i1 and the four calls' worst
	// cases; i2/a alone then passes it.
	limit := 20 * perItem
	released := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(released) }) }
	t.Cleanup(release)
	held := make(chan string, 4*items)
	hook := func(_ int, path string) llmtest.Reply {
		select {
		case <-released:
			return llmtest.Reply{}
		default:
		}
		switch {
		case strings.HasPrefix(path, "i1/"):
			return llmtest.Reply{}
		case path == "i2/a":
			// Once i3-i5 run: the halt must find them running.
			for range 3 {
				select {
				case <-held:
				case <-time.After(durDeadline):
					t.Errorf("i3-i5 never ran alongside i2")
				}
			}
			return llmtest.Reply{Usage: llmtest.Usage{Prompt: 1_000_000, Completion: 3}}
		}
		held <- path
		// Only the halt ends this call, by cancelling it.
		<-released
		return llmtest.Reply{}
	}
	for i := range c.workers {
		c.model.hook(fmt.Sprintf("sk-worker-%d", i), hook)
	}
	coord := c.startCoordinator("--max-cost-usd", fmt.Sprint(limit), "--concurrency", "4")
	if code := coord.wait(); code != exitFailed || !strings.Contains(coord.stderr(), "stopped: the batch's cost cap of ") {
		t.Fatalf("batch --nats --max-cost-usd: exit %d\n%s", code, coord.stderr())
	}
	b, rows := lastBatch(t, c.db)
	for _, r := range rows {
		id := fmt.Sprint(r.Item["id"])
		switch id {
		case "i1":
			if r.Status != runtime.StatusCompleted {
				t.Errorf("%s: %s, want completed before the halt", id, r.Status)
			}
		case "i2", "i3", "i4", "i5":
			if r.Status != runtime.StatusStopped || r.Run == "" {
				t.Errorf("%s: %q (%s) with run %q, want stopped by the halt while it ran, with its run to resume", id, r.Status, r.Error, r.Run)
			}
		default:
			if r.Run != "" {
				t.Errorf("%s started (run %s) after the halt", id, r.Run)
			}
		}
	}
	if b.Status != runtime.StatusStopped {
		t.Errorf("batch %s, want stopped", b.Status)
	}
	// Stopped by their workers, which said so, not given up on by the
	// coordinator.
	for id, run := range itemRuns(t, c.db) {
		if id != "i1" && run != "" && !workerStopped(t, c.db, run) {
			t.Errorf("%s: its worker did not stop its run %s (no run_finished event, stopped)", id, run)
		}
	}
	// i2 may reach its node b before the halt reaches its worker; i3-i5
	// are held in their node a until the halt ends it.
	for _, call := range c.workerCalls() {
		if id, node, _ := strings.Cut(call.path, "/"); node == "b" && id != "i1" && id != "i2" {
			t.Errorf("the model was asked for %s: a halted item went on to its next node", call.path)
		}
	}
	release()
	finished := storedCheckpoints(t, c.ns.jetStream())
	resumed := time.Now()
	if p := startDurProc(t, nil, "batch", "resume", "last", "--store", c.db, "--max-cost-usd", "0"); p.wait() != exitOK {
		t.Fatalf("batch resume: exit %d\n%s", p.wait(), p.stderr())
	}
	checkClusterBatch(t, c.ns.jetStream(), c.db, c.want, c.items)
	runOf := itemRuns(t, c.db)
	for _, call := range c.workerCalls() {
		id, node, _ := strings.Cut(call.path, "/")
		if call.at.After(resumed) && finished[runOf[id]+"/"+node] {
			t.Errorf("batch resume asked the model again for %s, whose checkpoint was stored before the halt", call.path)
		}
	}
}

// TestClusterBudgetHoldsWhenLaterItemsCostMore: under --max-cost-usd
// with --nats, items after the first three cost ten times as much. Every
// model call of every worker reserves from the batch's ledger, so the
// spend the store records never passes the cap however the items' costs
// change, and the stop line tells that spend: before, items were
// admitted by what the earlier ones cost, and the batch recorded far
// more than its cap and than its stop line said.
func TestClusterBudgetHoldsWhenLaterItemsCostMore(t *testing.T) {
	const items = 10
	c := startClusterWorkers(t, items, 2, 0)
	hook := func(_ int, path string) llmtest.Reply {
		output := 2000
		if id, _, _ := strings.Cut(path, "/"); !slices.Contains([]string{"i1", "i2", "i3"}, id) {
			output = 20000
		}
		return llmtest.Reply{Usage: llmtest.Usage{Prompt: 5, Completion: output}, Delay: 50 * time.Millisecond}
	}
	for i := range c.workers {
		c.model.hook(fmt.Sprintf("sk-worker-%d", i), hook)
	}
	const limit = 0.10
	coord := c.startCoordinator("--max-cost-usd", fmt.Sprint(limit))
	code := coord.wait()
	stopLine := regexp.MustCompile(`(?m)stopped: the batch's cost cap of .*$`).FindString(coord.stderr())
	if code != exitFailed || stopLine == "" {
		t.Fatalf("batch --nats --max-cost-usd: exit %d, want stopped by the cap\n%s", code, coord.stderr())
	}
	b, rows := lastBatch(t, c.db)
	spent := 0.0
	for _, r := range rows {
		spent += r.CostUSD
	}
	t.Logf("recorded $%.6f of $%.2f; %s", spent, limit, stopLine)

	if spent > limit+1e-9 {
		t.Errorf("the batch recorded $%.6f, more than its cap $%.2f", spent, limit)
	}
	if told := "reached: " + figures.USD(spent) + " spent"; !strings.Contains(stopLine, told) || !strings.Contains(b.Reason, told) {
		t.Errorf("the batch recorded %s, but its stop line says %q and its reason %q", figures.USD(spent), stopLine, b.Reason)
	}
	// Not only as rounded: the runs a worker was running when the batch
	// halted, seen by the coordinator or not, are recorded at what the
	// ledger settled for them.
	if settled, _, _ := ledgerSpent(t, c.ns.jetStream(), b.ID); math.Abs(settled-spent) > 1e-9 {
		t.Errorf("the ledger settled $%.6f, the store recorded $%.6f", settled, spent)
	}
}

// ledgerSpent is what the cost ledger of batch settled, with how many
// reservations it holds and its revision (the writes to the bucket up to
// its last).
func ledgerSpent(t *testing.T, js jetstream.JetStream, batch string) (spent float64, held int, revision uint64) {
	t.Helper()
	ctx := testwait.HangContext(t)
	kv, err := js.KeyValue(ctx, "flowrun-ledger")
	if err != nil {
		t.Fatal(err)
	}
	entry, err := kv.Get(ctx, batch)
	if err != nil {
		t.Fatalf("the cost ledger of batch %s: %v", batch, err)
	}
	var ledger struct {
		Spent float64            `json:"spent"`
		Held  map[string]float64 `json:"held"`
	}
	if err := json.Unmarshal(entry.Value(), &ledger); err != nil {
		t.Fatal(err)
	}
	return ledger.Spent, len(ledger.Held), entry.Revision()
}

// workerStopped says whether the events of run, mirrored into db from
// its worker, end with the run stopped.
func workerStopped(t *testing.T, db, run string) bool {
	t.Helper()
	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, err := st.Events(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	return len(evs) > 0 && evs[len(evs)-1].Type == runtime.EventRunFinished && evs[len(evs)-1].Status == runtime.StatusStopped
}

// TestClusterConcurrencyCapsOutstanding: with --nats, --concurrency 1
// keeps one item queued or running at a time across three workers of
// two slots each, so the model never sees two requests at once.
func TestClusterConcurrencyCapsOutstanding(t *testing.T) {
	c := startClusterWorkers(t, 6, 3, 30*time.Millisecond)
	c.coord = c.startCoordinator("--concurrency", "1")
	c.finish(t, c.coord)
	calls := c.workerCalls()
	for i := 1; i < len(calls); i++ {
		if calls[i].at.Before(calls[i-1].replied) {
			t.Errorf("request %d (%s) arrived before request %d (%s) was answered", i+1, calls[i].path, i, calls[i-1].path)
		}
	}
}

// TestClusterRunningItemShowsLive: the coordinator's store shows a
// remote item's run while its worker runs it (for batch show and flowrun
// serve): the run is there, running, with the events of its finished
// node, before the item has a result.
func TestClusterRunningItemShowsLive(t *testing.T) {
	c := startClusterWorkers(t, 1, 1, 0)
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	c.model.hook("sk-worker-0", func(_ int, path string) llmtest.Reply {
		if strings.HasSuffix(path, "/b") {
			<-release
		}
		return llmtest.Reply{}
	})
	c.coord = c.startCoordinator()
	live := func() bool {
		ctx := context.Background()
		st, err := store.Open(c.db)
		if err != nil {
			return false
		}
		defer st.Close()
		b, err := st.FindBatch(ctx, "last")
		if err != nil {
			return false
		}
		rows, err := st.BatchItems(ctx, b.ID)
		if err != nil || len(rows) != 1 || rows[0].Run == "" {
			return false
		}
		run, err := st.Run(ctx, rows[0].Run)
		if err != nil || run.Status != runtime.StatusRunning {
			return false
		}
		evs, err := st.Events(ctx, run.ID)
		if err != nil {
			return false
		}
		for _, e := range evs {
			if e.Type == runtime.EventNodeFinished && e.Path == "a" {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(durDeadline); !live(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the running item's run never showed in the coordinator's store with node a finished\n%s", c.coord.abort())
		}
	}
	unblock()
	c.finish(t, c.coord)
}

// TestClusterModelOverrideGoesWithTheJob: a batch started with --model
// runs its items on the workers with that model, not the pipeline's, and
// the item runs the coordinator mirrors record it: a resume of one here
// goes on with it too.
func TestClusterModelOverrideGoesWithTheJob(t *testing.T) {
	c := startClusterWorkers(t, 4, 2, 0)
	coord := c.startCoordinator("--model", "default=gpt-4.1")
	if code := coord.wait(); code != exitOK {
		t.Fatalf("flowrun batch --nats --model: exit %d\n%s", code, coord.stderr())
	}
	calls := c.workerCalls()
	if len(calls) == 0 {
		t.Fatal("the workers made no model call")
	}
	for _, call := range calls {
		if call.model != "gpt-4.1" {
			t.Fatalf("a worker asked for model %q at %s, want the batch's override gpt-4.1", call.model, call.path)
		}
	}
	st, err := store.Open(c.db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, rows := lastBatchIn(t, st)
	for _, row := range rows {
		run, err := st.Run(context.Background(), row.Run)
		if err != nil {
			t.Fatal(err)
		}
		if run.Spec.Models["default"] != "gpt-4.1" {
			t.Errorf("item %s: its mirrored run records models %v, want default=gpt-4.1", row.Key, run.Spec.Models)
		}
	}
}
