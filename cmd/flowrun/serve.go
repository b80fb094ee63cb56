package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/web"
)

func serveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("serve", "flowrun serve [--addr 127.0.0.1:8377] [--store PATH] [--token T] [--max-runs N] [DIR]\n\nServes the web UI: the runs in the store, live; starting, steering and\nforking runs of the pipelines under DIR (default: the current directory).\nA non-loopback --addr needs a token: --token, or one is generated and printed.")
	addr := fs.String("addr", "127.0.0.1:8377", "listen on this `host:port`")
	token := fs.String("token", "", "require this `token` (given once in the URL, then kept in a cookie)")
	maxRuns := fs.Int("max-runs", web.DefaultMaxRuns, "run at most `N` runs started from the UI at once (started, resumed or forked); more wait in a queue")
	storePath := storeFlag(fs)
	rest, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(rest) > 1 {
		fmt.Fprintln(stderr, "flowrun serve: name at most one directory of pipelines")
		return exitInvalid
	}
	if *maxRuns < 1 {
		fmt.Fprintf(stderr, "flowrun serve: --max-runs %d: give at least 1\n", *maxRuns)
		return exitInvalid
	}
	dir := "."
	if len(rest) == 1 {
		dir = rest[0]
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		fmt.Fprintf(stderr, "flowrun serve: %s is not a directory of pipelines\n", dir)
		return exitInvalid
	}
	if *token == "" && !web.IsLoopback(*addr) {
		*token = web.NewToken()
	}
	st, code, ok := storeFor(*storePath, false, stderr)
	if !ok {
		return code
	}
	defer st.Close()
	// The web UI's runs take no model flags; their notices go to stderr.
	eng, err := engine.New(engine.Options{Store: st, Notices: stderr})
	if err != nil {
		return fail(stderr, "flowrun serve", err)
	}
	defer eng.Close()
	srv, err := web.New(web.Options{Store: st, Dir: dir, Token: *token, Engine: eng, MaxRuns: *maxRuns})
	if err != nil {
		fmt.Fprintf(stderr, "flowrun serve: %v\n", err)
		return exitFailed
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		srv.Close()
		fmt.Fprintf(stderr, "flowrun serve: %v\n", err)
		return exitFailed
	}
	url := "http://" + ln.Addr().String() + "/"
	if *token != "" {
		url += "?token=" + *token
	}
	// The first line says which store is shown, and how to show another:
	// runs recorded into a different store are not missing, only elsewhere.
	fmt.Fprintf(stdout, "flowrun serve: %s shows the runs in %s (--store PATH or FLOWRUN_STORE shows another store) and starts the pipelines under %s\n",
		url, st.Path(), dir)
	// Serve stops the server first when the command is interrupted: its
	// live streams end and its runs are recorded as stopped and resumable.
	if err := srv.Serve(ctx, ln); err != nil {
		fmt.Fprintf(stderr, "flowrun serve: %v\n", err)
		return exitFailed
	}
	return exitOK
}
