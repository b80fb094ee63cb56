// Command flowrun runs, validates and draws YAML pipelines of LLM workflows.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/flowrun/flowrun/internal/proc"
	"github.com/flowrun/flowrun/internal/termview"
	"github.com/flowrun/flowrun/redact"
	"github.com/flowrun/flowrun/sandbox"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailed  = 1 // the run failed or stopped
	exitInvalid = 2 // invalid pipeline, input or usage
)

const usage = `flowrun runs LLM workflows written as YAML pipelines.

Usage:
  flowrun FILE [flags]              run a pipeline (same as flowrun run FILE)
  flowrun run FILE [flags]          run a pipeline
  flowrun validate FILE...          check pipelines; every problem with file:line:col
  flowrun test [PATH...]            run *.test.yaml cases offline with mocked models (--coverage, --junit FILE)
  flowrun plan FILE [--input k=v] [--json]
                                    the most a run can call and cost, before it starts
  flowrun graph FILE [--format mermaid|dot]
                                    draw a pipeline
  flowrun schema                    print the pipeline JSON schema
  flowrun resume RUN [--answer field=value] [--from SNAPSHOT|CHECKPOINT]
                                    continue a run, answering its question (or fork it, with --from)
  flowrun runs [--json]             list runs
  flowrun runs prune --older-than 30d
  flowrun show RUN [--json]         a run's timeline
  flowrun snapshot RUN --label L    label the run's current checkpoint
  flowrun snapshots RUN             list a run's snapshots
  flowrun rollback RUN SNAPSHOT     make a snapshot the run's current state
  flowrun batch FILE --dataset D [--label TEXT] [flags]
                                    run a pipeline over a dataset and score it
  flowrun batch resume BATCH [--retry-failed]
                                    continue a batch
  flowrun worker --nats URL --nats-trust KEY.pub --nats-sign KEY [--concurrency N]
                                    run batch items published with flowrun batch --nats
  flowrun cluster keygen --out DIR [--name NAME]
                                    make the signing keys of --nats coordinators and workers
  flowrun cluster setup --nats URL --nats-creds ADMIN
                                    create flowrun's streams and buckets, with their limits
  flowrun cluster permissions       the NATS permissions of the admin, coordinator and worker users
  flowrun cluster creds --role ROLE --account-seed FILE --out FILE
                                    a NATS credentials file of a role's user, for operator mode
  flowrun batches [--json]          list batches
  flowrun batch show BATCH [--item KEY | --failures] [--format text|json|jsonl|csv]
                                    a batch's summary and items; --item, --failures: items whole
  flowrun batch compare [A] B [--json]
                                    what changed from A to B (A: the batch before B), what B
                                    fixed and broke, and is it chance
  flowrun batch report BATCH [--compare A] [-o FILE]
                                    one self-contained HTML page of it
  flowrun batch rate BATCH ITEM --pass|--fail [--note TEXT]
                                    your verdict on an item: the metric human
  flowrun batch label BATCH TEXT [--description SENTENCE]
                                    name a batch (as flowrun batch --label does)
  flowrun import promptfoo CONFIG -o DIR
                                    convert a promptfoo configuration to a pipeline, dataset and score:
  flowrun sandbox install python [--from DIR|ARCHIVE]
                                    install CPython for WASI (code nodes' python)
  flowrun sandbox export [-o FILE]  write it as one archive for another machine
  flowrun sandbox status            what the code sandbox has installed
  flowrun cache stats|clear         the response cache: its size, or empty it
  flowrun mcp serve [DIR] [--http ADDR]
                                    serve every pipeline under DIR as an MCP tool
  flowrun serve [DIR] [--addr A] [--token T]
                                    the web UI: watch, start, steer and fork runs

Runs are kept in .flowrun/flowrun.db (--store PATH or FLOWRUN_STORE to change).
RUN is a run id, an unambiguous prefix of one, or last (the newest run).

Run "flowrun COMMAND --help" for a command's flags.
`

func main() {
	sandbox.WorkerMain()
	os.Exit(command(os.Args[1:]))
}

// command runs flowrun as a process: an interrupt or SIGTERM (on Windows,
// closing the console or logging off) stops the command, so that a run is
// recorded as stopped, and no child process outlives it.
func command(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer proc.KillAll()
	return cli(ctx, args, os.Stdin, os.Stdout, os.Stderr)
}

// cli runs one command and returns the process exit code.
func cli(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// Progress, errors and prompts are for people; stdout is sanitised by
	// each command that prints text there, and JSON is left as JSON.
	stderr = termview.Text{W: stderr}
	redact.Add(os.Getenv("OPENAI_API_KEY"))
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitInvalid
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "run":
		return runCmd(ctx, args[1:], stdin, stdout, stderr)
	case "test":
		return testCmd(ctx, args[1:], stdout, stderr)
	case "validate":
		return validateCmd(args[1:], termview.Text{W: stdout}, stderr)
	case "graph":
		return graphCmd(args[1:], termview.Text{W: stdout}, stderr)
	case "plan":
		return planCmd(args[1:], stdout, stderr)
	case "schema":
		return schemaCmd(args[1:], stdout, stderr)
	case "resume":
		return resumeCmd(ctx, args[1:], stdin, stdout, stderr)
	case "runs":
		return runsCmd(args[1:], stdout, stderr)
	case "show":
		return showCmd(args[1:], stdout, stderr)
	case "snapshot":
		return snapshotCmd(args[1:], stdout, stderr)
	case "snapshots":
		return snapshotsCmd(args[1:], stdout, stderr)
	case "rollback":
		return rollbackCmd(args[1:], stdout, stderr)
	case "sandbox":
		return sandboxCmd(ctx, args[1:], stdout, stderr)
	case "batches":
		return batchesCmd(ctx, args[1:], stdout, stderr)
	case "batch":
		return batchCmd(ctx, args[1:], stdin, stdout, stderr)
	case "cache":
		return cacheCmd(ctx, args[1:], stdout, stderr)
	case "mcp":
		return mcpCmd(ctx, args[1:], stdin, stdout, stderr)
	case "worker":
		return workerCmd(ctx, args[1:], stdout, stderr)
	case "cluster":
		return clusterCmd(ctx, args[1:], stdout, stderr)
	case "serve":
		return serveCmd(ctx, args[1:], stdout, stderr)
	case "import":
		return importCmd(ctx, args[1:], stdout, stderr)
	}
	if strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(stderr, "flowrun: unknown flag %s before a command or file; see flowrun --help\n", args[0])
		return exitInvalid
	}
	if !strings.HasSuffix(args[0], ".yaml") && !strings.HasSuffix(args[0], ".yml") {
		if _, err := os.Stat(args[0]); err != nil {
			fmt.Fprintf(stderr, "flowrun: unknown command %q; see flowrun --help\n", args[0])
			return exitInvalid
		}
	}
	return runCmd(ctx, args, stdin, stdout, stderr)
}

// parseFlags parses flags placed anywhere among the positional arguments,
// so that both "flowrun x.yaml --json" and "flowrun --json x.yaml" work.
// It returns the positional arguments, or an exit code when it should stop.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) ([]string, int, bool) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return nil, exitOK, false
		}
		if err != nil {
			fmt.Fprintf(stderr, "flowrun %s: %v (see flowrun %s --help)\n", fs.Name(), err, fs.Name())
			return nil, exitInvalid, false
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, 0, true
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func newFlagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}
