package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/internal/termview"
	"github.com/flowrun/flowrun/mcpserve"
)

const mcpUsage = `flowrun mcp serve [DIR] [--http ADDR] [--record DIR | --replay FILE]

Serves every pipeline under DIR (default: the current directory) as a tool
of an MCP server: the tool's name is the pipeline's name, its input schema
the pipeline's inputs, its output schema the pipeline's typed outputs. A
call runs the pipeline as a durable run (listed by flowrun runs), sends
progress notifications, and returns the outputs as structured content.
Over stdio by default (for Claude Desktop, Cursor and other clients that
start flowrun); with --http, Streamable HTTP on a loopback address, with a
bearer token printed on stderr. With --record DIR, each run's model
exchanges and MCP calls go to a cassette of its own,
DIR/PIPELINE.RUN.cassette.yaml.`

func mcpCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "serve" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(stdout, mcpUsage)
			return exitOK
		}
		fmt.Fprintln(stderr, "flowrun mcp: the command is flowrun mcp serve [DIR] [--http ADDR] (see flowrun mcp --help)")
		return exitInvalid
	}
	fset := newFlagSet("mcp serve", mcpUsage)
	addr := fset.String("http", "", "serve Streamable HTTP on this loopback `address` (such as 127.0.0.1:8765) instead of stdio")
	storePath := storeFlag(fset)
	var mf modelFlags
	mf.register(fset)
	fset.Lookup("record").Usage = "record each run into a cassette of its own in this `directory`: PIPELINE.RUN.cassette.yaml (a run resumed by an answer adds to its file)"
	dirs, code, ok := parseFlags(fset, args[1:], stdout, stderr)
	if !ok {
		return code
	}
	// --record names a directory of cassettes here, one a run.
	recordDir := mf.record
	mf.record = ""
	if len(dirs) > 1 {
		fmt.Fprintln(stderr, "flowrun mcp serve: name one directory")
		return exitInvalid
	}
	dir := "."
	if len(dirs) == 1 {
		dir = dirs[0]
	}
	o := mf.options(*storePath, stderr)
	eng, err := engine.New(o)
	if err != nil {
		return fail(stderr, "flowrun mcp serve", err)
	}
	defer eng.Close()
	server, err := mcpserve.New(dir, mcpserve.Options{Engine: eng, RecordDir: recordDir, Log: stderr, PrintJSON: termview.JSON})
	if err != nil {
		fmt.Fprintf(stderr, "flowrun mcp serve: %v\n", err)
		return exitInvalid
	}
	if *addr != "" {
		err = server.ServeHTTP(ctx, *addr)
		if errors.Is(err, mcpserve.ErrNotLoopback) {
			fmt.Fprintf(stderr, "flowrun mcp serve: --http %s: give a loopback address such as 127.0.0.1:8765 (flowrun serves MCP on this machine only)\n", *addr)
			return exitInvalid
		}
	} else {
		err = server.ServeStdio(ctx, stdin, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "flowrun mcp serve: %v\n", err)
		return exitFailed
	}
	return exitOK
}
