package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/flowtest"
)

// testFromRun writes a test case that replays a stored run: flowrun test
// --from-run RUN [-o FILE].
func testFromRun(storePath, runID, outFile string, extra []string, stdout, stderr io.Writer) int {
	if len(extra) > 0 {
		fmt.Fprintf(stderr, "flowrun test: --from-run takes no test paths (got %v)\n", extra)
		return exitInvalid
	}
	st, code, ok := storeFor(storePath, true, stderr)
	if !ok {
		return code
	}
	defer st.Close()
	target := outFile
	if target == "" {
		target = "stdout.test.yaml" // pipeline: is then relative to the current directory
	}
	r, b, err := flowtest.FromStoredRun(context.Background(), st, runID, target, batch.ExpectedOfRun(st))
	if r == nil {
		return storeError(err, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "flowrun test: %v\n", err)
		return exitInvalid
	}
	header := fmt.Sprintf("# Written by flowrun test --from-run %s: replays that run offline.\n", r.ID)
	if outFile == "" {
		fmt.Fprint(stdout, header+string(b))
		return exitOK
	}
	if err := os.WriteFile(outFile, []byte(header+string(b)), 0o644); err != nil {
		fmt.Fprintf(stderr, "flowrun test: -o: %v\n", err)
		return exitFailed
	}
	// A case the loader refuses is no use: say so now, not at the next run.
	if _, ds := flowtest.Load(outFile); len(ds) > 0 {
		fmt.Fprintf(stderr, "flowrun test: the case written to %s does not load:\n%s\n", outFile, ds)
		return exitFailed
	}
	fmt.Fprintf(stderr, "wrote %s; run it with: flowrun test %s\n", outFile, filepath.ToSlash(outFile))
	return exitOK
}
