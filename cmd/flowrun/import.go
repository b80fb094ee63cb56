package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/flowrun/flowrun/importer/promptfoo"
)

func importCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := newFlagSet("import", "flowrun import promptfoo CONFIG -o DIR\n\nConverts a promptfoo configuration (promptfooconfig.yaml) into a pipeline, a\ndataset and a score: section in DIR, and lists what it could not convert.")
	out := flags.String("o", "", "write the converted files into this `directory` (required; created if missing)")
	root := flags.String("root", "", "read the files the configuration names from anywhere inside this `directory`, which holds it (the repository's root); by default only from the configuration's directory")
	rest, code, ok := parseFlags(flags, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(rest) != 2 || rest[0] != "promptfoo" || *out == "" {
		fmt.Fprintln(stderr, "flowrun import: usage: flowrun import promptfoo promptfooconfig.yaml -o DIR")
		return exitInvalid
	}
	within := *root
	if within == "" {
		within = filepath.Dir(rest[1])
	}
	res, err := promptfoo.ConvertWithin(ctx, rest[1], within)
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "flowrun import: stopped (interrupted); nothing was written")
		return exitFailed
	}
	if err != nil {
		fmt.Fprintf(stderr, "flowrun import: %v\n", err)
		return exitInvalid
	}
	written, err := res.Write(*out)
	for _, path := range written {
		fmt.Fprintf(stdout, "wrote %s\n", path)
	}
	var exists *promptfoo.ExistsError
	switch {
	case errors.As(err, &exists):
		fmt.Fprintf(stderr, "flowrun import: %s; choose another -o directory, or remove it\n", exists)
		return exitInvalid
	case err != nil:
		fmt.Fprintf(stderr, "flowrun import: %v\n", err)
		return exitFailed
	}
	if len(res.Problems) > 0 {
		fmt.Fprintf(stdout, "\nnot converted, or converted approximately (%d):\n", len(res.Problems))
		for _, p := range res.Problems {
			fmt.Fprintf(stdout, "  %s\n", p)
		}
	}
	dataset := filepath.Join(*out, promptfoo.Dataset)
	fmt.Fprintf(stdout, "\nnext:\n  flowrun validate %s\n", filepath.Join(*out, "*.yaml"))
	// promptfoo runs every prompt with every provider: one line each.
	for _, p := range res.Pipelines {
		fmt.Fprintf(stdout, "  flowrun batch %s --dataset %s\n", filepath.Join(*out, p), dataset)
		for _, m := range res.Models[min(1, len(res.Models)):] {
			fmt.Fprintf(stdout, "  flowrun batch %s --dataset %s --model default=%s\n", filepath.Join(*out, p), dataset, m)
		}
	}
	return exitOK
}
