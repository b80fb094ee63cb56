package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/flowrun/flowrun/cluster"
)

// natsReplicasFlag is --nats-replicas, for the commands that may be the
// first to reach a NATS server and so create flowrun's streams.
func natsReplicasFlag(fs *flag.FlagSet) *int {
	return fs.Int("nats-replicas", 1, "copies JetStream keeps of the streams flowrun creates if they do not exist yet (3 on a three-node cluster)")
}

func workerCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("worker", "flowrun worker --nats URL --nats-trust COORDINATOR.pub --nats-sign WORKER.key [--concurrency N]\n\nRuns batch items published by flowrun batch --nats until stopped (SIGTERM or\nCtrl-C: the items in flight stop at their next node and go back to the\nqueue, where another worker resumes them from their checkpoints). Model\nendpoints and keys come from this process's environment. Only jobs signed\nby a trusted coordinator key run (see flowrun cluster keygen).")
	url := fs.String("nats", "", "the NATS server `URL`, e.g. nats://127.0.0.1:4222 (required)")
	concurrency := fs.Int("concurrency", 4, "run `N` items at once")
	ackWait := fs.Duration("ack-wait", 30*time.Second, "hand an item to another worker when this one has been silent for `duration` (it heartbeats at a third of it)")
	replicas := natsReplicasFlag(fs)
	cacheDir := fs.String("cache-dir", "", "where fetched pipelines are kept (default: a directory under the user cache)")
	var nf natsFlags
	nf.register(fs, true)
	allowStdio := fs.Bool("allow-mcp-stdio", false, "run pipelines whose mcp: servers start local commands (by default they are refused)")
	var allowCommands inputFlags
	fs.Var(&allowCommands, "allow-mcp-command", "run pipelines whose mcp: servers start this `command` only, as written in the pipeline (repeatable)")
	var allowEnv, allowKeyEnv, allowEndpoints inputFlags
	fs.Var(&allowEnv, "allow-env", "let pipelines read this `variable` of the worker's environment (env:, mcp: values; repeatable; by default none)")
	fs.Var(&allowKeyEnv, "allow-key-env", "let a model's api_key_env name this `variable` beside OPENAI_API_KEY (repeatable)")
	fs.Var(&allowEndpoints, "allow-endpoint", "let a model's base_url send its key to this `URL` beside the worker's own endpoint, OPENAI_BASE_URL or OpenAI's (repeatable)")
	var mf modelFlags
	mf.register(fs)
	rest, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(rest) != 0 || *url == "" {
		fmt.Fprintln(stderr, "flowrun worker: give the NATS server: flowrun worker --nats nats://HOST:4222 (see flowrun worker --help)")
		return exitInvalid
	}
	o, err := nf.options(*url, true)
	if err != nil {
		fmt.Fprintf(stderr, "flowrun worker: %v\n", err)
		return exitInvalid
	}
	if *concurrency < 1 {
		fmt.Fprintf(stderr, "flowrun worker: --concurrency %d: give at least 1\n", *concurrency)
		return exitInvalid
	}
	eng, err := mf.engine("", stderr)
	if err != nil {
		return fail(stderr, "flowrun worker", err)
	}
	defer eng.Close()
	o.AckWait, o.Replicas = *ackWait, *replicas
	w := &cluster.Worker{Options: o, Concurrency: *concurrency, CacheDir: *cacheDir, Log: stderr,
		AllowMCPStdio: *allowStdio, AllowMCPCommands: allowCommands, AllowEnv: allowEnv, AllowKeyEnv: allowKeyEnv, AllowEndpoints: allowEndpoints, Engine: eng}
	if o.Insecure {
		fmt.Fprintln(stderr, "flowrun worker: warning: --nats-insecure: this worker runs any job published on the server, unsigned or signed by anyone, with this machine's model keys and files")
	}
	fmt.Fprintf(stderr, "flowrun worker: pulling items from %s, %d at a time\n", cluster.DisplayURL(*url), *concurrency)
	if err := w.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "flowrun worker: %v\n", clusterHint(err))
		return exitFailed
	}
	fmt.Fprintln(stderr, "flowrun worker: stopped")
	return exitOK
}
