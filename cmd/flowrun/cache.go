package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/flowrun/flowrun/store"
)

const cacheUsage = `flowrun cache stats [--json]   entries, hits and size of the response cache
flowrun cache clear            delete every cached model reply

The response cache answers identical model requests made with --cache or
cache: true / always with no network and $0 (see docs/providers.md).
`

func cacheCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, "flowrun cache: name a subcommand\n"+cacheUsage)
		return exitInvalid
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, cacheUsage)
		return exitOK
	case "stats":
		fs := newFlagSet("cache stats", "flowrun cache stats [--json]\n\nEntries, hits and size of the run store's response cache.")
		asJSON := fs.Bool("json", false, "print the figures as JSON")
		return storeCmd(fs, args[1:], stdout, stderr, 0, "flowrun cache stats takes no arguments", false, func(st *store.Store, _ []string) int {
			s, err := st.ResponseCacheStats(ctx)
			if err != nil {
				return storeError(err, stderr)
			}
			if *asJSON {
				b, _ := json.Marshal(s)
				fmt.Fprintln(stdout, string(b))
				return exitOK
			}
			fmt.Fprintf(stdout, "entries  %d\nhits     %d\nsize     %d bytes\n", s.Entries, s.Hits, s.Bytes)
			return exitOK
		})
	case "clear":
		fs := newFlagSet("cache clear", "flowrun cache clear\n\nDeletes every cached model reply from the run store.")
		return storeCmd(fs, args[1:], stdout, stderr, 0, "flowrun cache clear takes no arguments", false, func(st *store.Store, _ []string) int {
			n, err := st.ClearResponseCache(ctx)
			if err != nil {
				return storeError(err, stderr)
			}
			fmt.Fprintf(stdout, "cleared %d cached repl%s\n", n, map[bool]string{true: "y", false: "ies"}[n == 1])
			return exitOK
		})
	}
	fmt.Fprintf(stderr, "flowrun cache: unknown subcommand %q (stats, clear; see flowrun cache --help)\n", args[0])
	return exitInvalid
}
