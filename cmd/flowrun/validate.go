package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/flowtest"
	"github.com/flowrun/flowrun/graph"
	"github.com/flowrun/flowrun/mcpclient"
)

func validateCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("validate", "flowrun validate FILE...\n\nChecks each pipeline against the schema and every semantic rule,\nand prints all problems with file:line:col. Exit 2 on any error.")
	refreshMCP := fs.Bool("refresh-mcp", false, "list the tools of every MCP server again instead of reading the cached listing")
	files, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(files) == 0 {
		fmt.Fprintln(stderr, "flowrun validate: name at least one pipeline file")
		return exitInvalid
	}
	code = exitOK
	lister := &mcpclient.ListingCache{Dir: mcpclient.DefaultListingDir(), Refresh: *refreshMCP}
	for _, f := range files {
		ok, skipped, ds := flowtest.Validate(f, dsl.Options{ListMCP: lister.List})
		if skipped {
			fmt.Fprintf(stdout, "%s: a cassette, skipped\n", f)
			continue
		}
		if ok && !strings.HasSuffix(f, ".test.yaml") {
			if p, _ := dsl.LoadWith(f, dsl.Options{ListMCP: lister.List}); p != nil {
				ds = append(ds, costWarnings(p)...)
			}
		}
		if len(ds) > 0 {
			fmt.Fprintln(stderr, diagnosticsText(ds))
		}
		if !ok {
			code = exitInvalid
			continue
		}
		fmt.Fprintf(stdout, "%s: ok\n", f)
	}
	return code
}

func graphCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("graph", "flowrun graph FILE [--format mermaid|dot]")
	format := fs.String("format", "mermaid", "output format: mermaid or dot")
	files, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(files) != 1 {
		fmt.Fprintln(stderr, "flowrun graph: name one pipeline file")
		return exitInvalid
	}
	if *format != "mermaid" && *format != "dot" {
		fmt.Fprintf(stderr, "flowrun graph: unknown format %q: use mermaid or dot\n", *format)
		return exitInvalid
	}
	p, ds := dsl.Load(files[0])
	if p == nil {
		fmt.Fprintln(stderr, diagnosticsText(ds))
		return exitInvalid
	}
	if *format == "dot" {
		fmt.Fprint(stdout, graph.Dot(p))
	} else {
		fmt.Fprint(stdout, graph.Mermaid(p))
	}
	return exitOK
}

func schemaCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("schema", "flowrun schema\n\nPrints the JSON schema pipeline files follow (for editors: yaml-language-server).")
	rest, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintln(stderr, "flowrun schema: takes no arguments")
		return exitInvalid
	}
	_, _ = stdout.Write(dsl.Schema())
	return exitOK
}
