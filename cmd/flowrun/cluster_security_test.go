package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/flowrun/flowrun/cluster"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// waitStderr waits until p has written want on stderr.
func waitStderr(t *testing.T, p *durProc, want string) {
	t.Helper()
	for deadline := time.Now().Add(durDeadline); !strings.Contains(p.stderr(), want); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the stderr of flowrun %s:\n%s", want, strings.Join(p.args, " "), p.stderr())
		}
	}
}

// TestClusterWorkerRefusesStrangersJobs: a second flowrun batch on the
// same server, unsigned (--nats-insecure) or signed by a key the workers
// do not trust, gets nothing run: the worker reports each job, asks the
// model nothing for it and records no result; the trusted coordinator's
// batch then completes on the same worker.
func TestClusterWorkerRefusesStrangersJobs(t *testing.T) {
	c := startClusterWorkers(t, 3, 1, 0)
	worker := c.workers[0]
	evilDir := t.TempDir()
	other := filepath.Join(evilDir, "keys")
	if code, stdout, stderr := flowrun(t, "cluster", "keygen", "--out", other); code != exitOK || !strings.Contains(stdout, "coordinator.key") {
		t.Fatalf("cluster keygen: exit %d\n%s%s", code, stdout, stderr)
	}
	if fi, err := os.Stat(filepath.Join(other, "coordinator.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("coordinator.key: %v, mode %v; want 0600", err, fi.Mode())
	}
	for _, evil := range []struct {
		name   string
		flags  []string
		report string
	}{
		{"unsigned", []string{"--nats-insecure"}, "it is not signed"},
		{"untrusted key", []string{"--nats-sign", filepath.Join(other, "coordinator.key"), "--nats-trust-worker", keyFile(t, "worker.pub")},
			"signed by a key not trusted here"},
	} {
		db := filepath.Join(t.TempDir(), "evil.db")
		args := append([]string{"batch", c.pipeline, "--dataset", c.data, "--nats", c.ns.url(), "--store", db}, evil.flags...)
		stranger := startDurProc(t, nil, args...)
		waitStderr(t, worker, "refused the job on flowrun.items.")
		waitStderr(t, worker, evil.report)
		if calls := c.workerCalls(); len(calls) != 0 {
			t.Fatalf("%s: the worker asked the model for a stranger's job: %v", evil.name, calls)
		}
		stranger.kill()
		<-stranger.exited()
		b, _ := lastBatch(t, db)
		kv, err := c.ns.jetStream().KeyValue(context.Background(), "flowrun-results")
		if err != nil {
			t.Fatal(err)
		}
		if keys, err := kv.ListKeysFiltered(context.Background(), b.ID+".>"); err == nil {
			for k := range keys.Keys() {
				t.Errorf("%s: a result %s was recorded for a stranger's job", evil.name, k)
			}
		}
	}
	c.coord = c.startCoordinator()
	c.finish(t, c.coord)
}

// TestClusterWorkerNeedsTrust: a worker given no coordinator key refuses
// to start and says how to make one; with --nats-insecure it starts and
// warns.
func TestClusterWorkerNeedsTrust(t *testing.T) {
	ns := startNATS(t)
	code, _, stderr := flowrun(t, "worker", "--nats", ns.url())
	if code != exitInvalid || !strings.Contains(stderr, "--nats-trust") || !strings.Contains(stderr, "flowrun cluster keygen --out DIR") {
		t.Fatalf("worker without --nats-trust: exit %d\n%s", code, stderr)
	}
	dir := t.TempDir()
	pipeline := writeFile(t, dir, "kill.yaml", killBatchPipeline)
	code, _, stderr = flowrun(t, "batch", pipeline, "--dataset", clusterItems(t, dir, 1), "--nats", ns.url())
	if code != exitInvalid || !strings.Contains(stderr, "give --nats-sign COORDINATOR.key and --nats-trust-worker WORKER.pub") {
		t.Fatalf("batch --nats without --nats-sign: exit %d\n%s", code, stderr)
	}
	w := startDurProc(t, nil, "worker", "--nats", ns.url(), "--nats-insecure", "--cache-dir", t.TempDir())
	waitStderr(t, w, "pulling items")
	if !strings.Contains(w.stderr(), "warning: --nats-insecure") {
		t.Fatalf("worker --nats-insecure gave no warning:\n%s", w.stderr())
	}
}

// TestClusterForgedResultsAndCostsIgnored: a stranger connected to the
// server sees each job as it is published and at once creates results
// for it (under the item's key, and under the worker's own key) and
// publishes a model turn costing $999 on its run. The coordinator, with
// --max-cost-usd 1, reports and ignores them all: the batch completes
// with the local outputs and is not halted.
func TestClusterForgedResultsAndCostsIgnored(t *testing.T) {
	c := startClusterWorkers(t, 4, 2, 50*time.Millisecond)
	nc, err := nats.Connect(c.ns.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := clusterKeyDir()
	keys, err := cluster.LoadKeys([]string{filepath.Join(dir, "worker.pub")})
	if err != nil {
		t.Fatal(err)
	}
	var workerID string
	for id := range keys {
		workerID = id
	}
	forged := make(chan error, 100)
	sub, err := nc.Subscribe("flowrun.items.>", func(m *nats.Msg) {
		var job cluster.Job
		if err := json.Unmarshal(m.Data, &job); err != nil {
			forged <- err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		kv, err := js.KeyValue(ctx, "flowrun-results")
		if err != nil {
			forged <- err
			return
		}
		item := fmt.Sprintf("%s.%d", job.Batch, job.Index)
		res, _ := json.Marshal(cluster.Result{Run: job.Run, Status: runtime.StatusCompleted, Outputs: map[string]any{"b": "forged"}})
		wrapped, _ := json.Marshal(map[string]any{"key": workerID, "sig": "Zm9yZ2Vk", "body": json.RawMessage(res)})
		for key, value := range map[string][]byte{item: res, item + "." + workerID: wrapped, item + ".unsigned": wrapped} {
			if _, err := kv.Create(ctx, key, value); err != nil {
				forged <- fmt.Errorf("creating %s: %w", key, err)
				return
			}
		}
		turn, _ := json.Marshal(map[string]any{"type": runtime.EventModelTurn, "run": job.Run, "path": "a",
			"turn": map[string]any{"cost_usd": 999}, "cost_usd": 999})
		if _, err := js.Publish(ctx, "flowrun.ev."+job.Run, turn); err != nil {
			forged <- err
			return
		}
		forged <- nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	c.coord = c.startCoordinator("--max-cost-usd", "1")
	for range c.items {
		select {
		case err := <-forged:
			if err != nil {
				t.Fatalf("forging: %v", err)
			}
		case <-time.After(durDeadline):
			t.Fatalf("the stranger saw no job\n%s", c.coord.abort())
		}
	}
	if code := c.coord.wait(); code != exitOK || summaryLine.FindString(c.coord.stderr()) != c.summary {
		t.Fatalf("batch: exit %d, want the summary %q\n%s", code, c.summary, c.coord.stderr())
	}
	checkMirrored(t, c.db, c.want, c.items)
	for _, want := range []string{"refused the result of item", "refused an event of run"} {
		if !strings.Contains(c.coord.stderr(), want) {
			t.Errorf("the coordinator did not report %q:\n%s", want, c.coord.stderr())
		}
	}
}

// TestClusterWorkerRefusesLocalProcesses: a trusted coordinator's
// pipeline that starts an MCP server on stdin/stdout fails on a worker
// not allowed to start it, naming the server and command, and the
// command never runs; --allow-mcp-command for another command does not
// allow it, --allow-mcp-stdio does.
func TestClusterWorkerRefusesLocalProcesses(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "started")
	pipeline := writeFile(t, dir, "mcp.yaml", `
version: 1
name: mcpjob
inputs:
  id: {type: string}
mcp:
  local: {command: sh, args: [-c, "touch `+marker+`"]}
nodes:
  - id: call
    tool: {name: local.anything}
outputs:
  x: nodes.call
`)
	data := clusterItems(t, dir, 1)
	ns := startNATS(t)
	model := newDurModel(t)
	run := func(allow ...string) string {
		w := startDurProc(t, model.env("sk-w"), append(append([]string{"worker", "--nats", ns.url(), "--cache-dir", t.TempDir()}, workerKeys(t)...), allow...)...)
		defer func() { w.kill(); <-w.exited() }()
		db := filepath.Join(t.TempDir(), "coord.db")
		code, _, stderr := runDurProc(t, nil, append([]string{"batch", pipeline, "--dataset", data, "--nats", ns.url(), "--store", db}, coordinatorKeys(t)...)...)
		if code != exitOK {
			t.Fatalf("batch: exit %d\n%s", code, stderr)
		}
		_, rows := lastBatch(t, db)
		return rows[0].Error
	}
	for _, allow := range [][]string{nil, {"--allow-mcp-command", "bash"}} {
		msg := run(allow...)
		if !strings.Contains(msg, `mcp server "local" would start the command "sh"`) || !strings.Contains(msg, "not allowed on this worker: mcp.yaml:7:3: ") {
			t.Errorf("worker %v: the item failed with %q, want the server refused", allow, msg)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("worker %v: the MCP server's command ran", allow)
		}
	}
	run("--allow-mcp-stdio")
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("worker --allow-mcp-stdio: the MCP server's command did not run: %v", err)
	}
}

// TestClusterImageInputStaysOnTheCoordinator: an item whose image input
// names a file on the worker's host fails by the runtime's rule for a
// remote caller's files, in the same words as one naming a host file that
// does not exist (no oracle for the host's files), and the model is sent
// nothing: a worker reads no host file a job names.
func TestClusterImageInputStaysOnTheCoordinator(t *testing.T) {
	dir := t.TempDir()
	private := writeFile(t, t.TempDir(), "private.png", "the worker's own picture")
	pipeline := writeFile(t, dir, "img.yaml", `
version: 1
name: img
models: {default: {model: gpt-4.1-mini}}
inputs:
  id: {type: string}
  image: {type: string}
nodes:
  - id: a
    llm: {prompt: "@${{ inputs.id }}/a look", images: ["${{ inputs.image }}"]}
outputs:
  b: nodes.a.text
`)
	absent := filepath.Join(filepath.Dir(private), "absent.png")
	data := writeFile(t, dir, "items.jsonl", fmt.Sprintf("{\"id\": \"i1\", \"image\": %q}\n{\"id\": \"i2\", \"image\": %q}\n", private, absent))
	ns := startNATS(t)
	model := newDurModel(t)
	startWorker(t, model, "sk-worker-0", ns.url())
	db := filepath.Join(t.TempDir(), "coord.db")
	code, _, stderr := runDurProc(t, nil, append([]string{"batch", pipeline, "--dataset", data, "--nats", ns.url(), "--store", db}, coordinatorKeys(t)...)...)
	if code != exitOK {
		t.Fatalf("batch: exit %d\n%s", code, stderr)
	}
	_, rows := lastBatch(t, db)
	for _, r := range rows {
		if r.Status != runtime.StatusFailed || !strings.Contains(r.Error, "images[0]") || !strings.Contains(r.Error, "escapes the pipeline directory") {
			t.Errorf("item %s: %s, %q; want it failed for its image", r.Key, r.Status, r.Error)
		}
	}
	if there, missing := strings.ReplaceAll(rows[0].Error, private, "PATH"), strings.ReplaceAll(rows[1].Error, absent, "PATH"); there != missing {
		t.Errorf("the errors tell an existing host file from a missing one:\n%s\n%s", there, missing)
	}
	if paths := model.paths("sk-worker-0"); len(paths) != 0 {
		t.Errorf("the worker sent the model %v", paths)
	}
}

// TestClusterLockedDownBatch: on a server whose users have only the
// permissions cluster.Permissions gives their roles, set up by flowrun
// cluster setup with the admin credential, a batch under --max-cost-usd
// runs on two workers with their worker credential and a coordinator
// with its own, to the outputs of the same batch run locally, one result
// per item: the coordinator may write the batch's cost ledger, the
// workers may reserve from it by compare-and-set, and the ledger settles
// at what the store recorded.
func TestClusterLockedDownBatch(t *testing.T) {
	ns := startLockedNATS(t, "--ack-wait", "3s")
	c := startClusterWorkersOn(t, ns, 6, 2, 0)
	c.coord = c.startCoordinator("--max-cost-usd", "1")
	c.finish(t, c.coord)
	b, rows := lastBatch(t, c.db)
	recorded := 0.0
	for _, r := range rows {
		recorded += r.CostUSD
	}
	if settled, held, revision := ledgerSpent(t, ns.jetStream(), b.ID); math.Abs(settled-recorded) > 1e-9 || held != 0 || revision < uint64(2*c.items) {
		t.Errorf("the ledger settled $%v with %d reservations held at revision %d; the store recorded $%v for %d calls",
			settled, held, revision, recorded, 2*c.items)
	}
}

// TestClusterWorkerKeepsSecrets: a trusted coordinator's pipeline cannot
// make a worker send a key of its environment to an endpoint of the
// pipeline's choosing, nor read a variable of the worker's environment:
// each item fails, naming what was refused, and the other endpoint sees
// no request; a worker whose operator allowed that endpoint and variable
// runs it. A worker's own endpoint, user name included, appears in
// nothing it publishes on NATS.
func TestClusterWorkerKeepsSecrets(t *testing.T) {
	dir := t.TempDir()
	elsewhere := newDurModel(t)
	keyed := writeFile(t, dir, "keyed.yaml", strings.Replace(killBatchPipeline, "models: {default: {model: gpt-4.1-mini}}",
		"models: {default: {model: gpt-4.1-mini, base_url: \""+elsewhere.srv.URL+"\", api_key_env: AWS_SECRET_ACCESS_KEY}}", 1))
	envJob := writeFile(t, dir, "env.yaml", "version: 1\nname: envjob\nenv: [AWS_SECRET_ACCESS_KEY]\ninputs:\n  id: {type: string}\nnodes:\n  - id: s\n    set: {}\noutputs:\n  x: env.AWS_SECRET_ACCESS_KEY\n")
	plain := writeFile(t, dir, "plain.yaml", killBatchPipeline)
	data := clusterItems(t, dir, 1)
	ns := startNATS(t)
	own := newDurModel(t)
	const secret = "aws-secret-0123456789abcdef"
	env := []string{"OPENAI_BASE_URL=" + strings.Replace(own.srv.URL, "http://", "http://alice@", 1), "OPENAI_API_KEY=sk-own",
		"AWS_SECRET_ACCESS_KEY=" + secret}
	run := func(pipeline string, allow ...string) *store.BatchItem {
		t.Helper()
		w := startDurProc(t, env, append(append([]string{"worker", "--nats", ns.url(), "--cache-dir", t.TempDir()}, workerKeys(t)...), allow...)...)
		defer func() { w.kill(); <-w.exited() }()
		db := filepath.Join(t.TempDir(), "coord.db")
		code, _, stderr := runDurProc(t, nil, append([]string{"batch", pipeline, "--dataset", data, "--nats", ns.url(), "--store", db}, coordinatorKeys(t)...)...)
		if code != exitOK && code != exitFailed {
			t.Fatalf("batch: exit %d\n%s", code, stderr)
		}
		_, rows := lastBatch(t, db)
		return rows[0]
	}
	if row := run(keyed); !strings.Contains(row.Error, "not allowed on this worker") || !strings.Contains(row.Error, "api_key_env names AWS_SECRET_ACCESS_KEY") ||
		!strings.Contains(row.Error, "would send a key to "+elsewhere.srv.URL) {
		t.Errorf("a pipeline sending the worker's AWS key elsewhere: %q, want it refused", row.Error)
	}
	if n := len(elsewhere.srv.Requests()); n != 0 {
		t.Errorf("the pipeline's endpoint got %d requests from a worker that did not allow it", n)
	}
	if row := run(envJob); !strings.Contains(row.Error, "env: names AWS_SECRET_ACCESS_KEY") || strings.Contains(fmt.Sprint(row), secret) {
		t.Errorf("a pipeline reading the worker's AWS key: %+v, want it refused", row)
	}
	if row := run(keyed, "--allow-endpoint", elsewhere.srv.URL, "--allow-key-env", "AWS_SECRET_ACCESS_KEY"); row.Status != runtime.StatusCompleted {
		t.Errorf("a worker allowing the endpoint and the variable: %s %q", row.Status, row.Error)
	}
	if reqs := elsewhere.srv.Requests(); len(reqs) == 0 || reqs[0].Header.Get("Authorization") != "Bearer "+secret {
		t.Errorf("the allowed endpoint got %d requests, want them with the allowed key", len(reqs))
	}
	if row := run(plain); row.Status != runtime.StatusCompleted {
		t.Fatalf("a plain pipeline: %s %q", row.Status, row.Error)
	}
	host := strings.TrimPrefix(strings.TrimSuffix(own.srv.URL, "/v1"), "http://")
	turns := 0
	for _, text := range streamMessages(t, ns.jetStream(), "FLOWRUN_RUNS") {
		turns += strings.Count(text, `"model_turn"`)
		if strings.Contains(text, "alice") || strings.Contains(text, host) {
			t.Errorf("the worker published its endpoint: %s", text)
		}
	}
	if turns == 0 {
		t.Error("no model turn was published")
	}
}

// streamMessages are the data of every message stream holds.
func streamMessages(t *testing.T, js jetstream.JetStream, stream string) []string {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for seq := uint64(1); seq <= s.CachedInfo().State.LastSeq; seq++ {
		if msg, err := s.GetMsg(ctx, seq); err == nil {
			out = append(out, string(msg.Data))
		}
	}
	return out
}

// TestClusterCredsModeRefused: a --nats-creds file that group or others
// can read is refused, by the worker, the batch and the setup, with the
// command that fixes it.
func TestClusterCredsModeRefused(t *testing.T) {
	dir := t.TempDir()
	creds := writeFile(t, dir, "worker.nk", "SUAIBDPBAUTWCWBKIO6XHQNINK5FWJW4OHLXC3HQ2KFE4PEJUA44CNHTC4")
	data := clusterItems(t, dir, 1)
	pipeline := writeFile(t, dir, "p.yaml", killBatchPipeline)
	for _, args := range [][]string{
		append([]string{"worker", "--nats", "nats://127.0.0.1:1", "--nats-creds", creds}, workerKeys(t)...),
		append([]string{"batch", pipeline, "--dataset", data, "--store", filepath.Join(dir, "s.db"), "--nats", "nats://127.0.0.1:1", "--nats-creds", creds}, coordinatorKeys(t)...),
		{"cluster", "setup", "--nats", "nats://127.0.0.1:1", "--nats-creds", creds},
	} {
		code, _, stderr := flowrun(t, args...)
		if code == exitOK || !strings.Contains(stderr, "mode is 0644") || !strings.Contains(stderr, "chmod 600 "+creds) {
			t.Errorf("%s with credentials of mode 0644: exit %d\n%s", args[0], code, stderr)
		}
	}
}

// TestClusterCredsCommand: flowrun cluster creds writes a role's
// credentials file from the account's seed, which it refuses while
// others can read it, saying how to fix it.
func TestClusterCredsCommand(t *testing.T) {
	dir := t.TempDir()
	kp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	seedFile := writeFile(t, dir, "flowrun.nk", string(seed))
	out := filepath.Join(dir, "worker.creds")
	code, _, stderr := flowrun(t, "cluster", "creds", "--role", "worker", "--account-seed", seedFile, "--out", out)
	if code == exitOK || !strings.Contains(stderr, "chmod 600 "+seedFile) {
		t.Errorf("an account seed of mode 0644: exit %d\n%s", code, stderr)
	}
	if err := os.Chmod(seedFile, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := flowrun(t, "cluster", "creds", "--role", "worker", "--account-seed", seedFile, "--out", out); code != exitOK {
		t.Fatalf("flowrun cluster creds: exit %d\n%s", code, stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(data), "BEGIN NATS USER JWT") {
		t.Errorf("the credentials file: %v\n%s", err, data)
	}
	if code, _, _ := flowrun(t, "cluster", "creds", "--role", "boss", "--account-seed", seedFile, "--out", filepath.Join(dir, "x")); code == exitOK {
		t.Error("a role that does not exist was given credentials")
	}
}
