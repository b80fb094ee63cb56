package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/flowrun/flowrun/flowtest"
)

func testCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("test", "flowrun test [PATH...] [--run REGEXP] [--junit FILE] [--coverage] [-v]\n       flowrun test --from-run RUN [-o FILE] [--store PATH]\n\nRuns the test files (*.test.yaml) under PATHs (default .), offline, cases in\nparallel. Exit 0 all passed, 1 a case failed, 2 a test file is invalid.\nWith --from-run, writes a test case that replays a stored run instead.")
	run := fs.String("run", "", "run only the cases whose name matches this `regexp`")
	junit := fs.String("junit", "", "write the results as JUnit XML to `file`")
	coverage := fs.Bool("coverage", false, "report the nodes, branch cases and loop exits no case exercised, per pipeline")
	verbose := fs.Bool("v", false, "print passing cases too")
	fromRun := fs.String("from-run", "", "write a test case that replays this `run` (an id, a unique prefix, or last) instead of running tests")
	outFile := fs.String("o", "", "with --from-run, write the test case to this `file` (default stdout)")
	storePath := storeFlag(fs)
	paths, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if *fromRun != "" {
		return testFromRun(*storePath, *fromRun, *outFile, paths, stdout, stderr)
	}
	if len(paths) == 0 {
		paths = []string{"."}
	}
	var filter *regexp.Regexp
	if *run != "" {
		var err error
		if filter, err = regexp.Compile(*run); err != nil {
			fmt.Fprintf(stderr, "flowrun test: --run: %v\n", err)
			return exitInvalid
		}
	}
	found, err := flowtest.Find(paths)
	if err != nil {
		fmt.Fprintf(stderr, "flowrun test: %v\n", err)
		return exitInvalid
	}
	if len(found) == 0 {
		fmt.Fprintf(stderr, "flowrun test: no *.test.yaml files under %s\n", strings.Join(paths, ", "))
		return exitInvalid
	}
	files, ds := flowtest.LoadAll(found)
	if len(ds) > 0 {
		fmt.Fprintln(stderr, diagnosticsText(ds))
		return exitInvalid
	}
	runner := &flowtest.Runner{}
	defer runner.Close()
	began := time.Now()
	results := runner.RunAll(ctx, files, filter, runtime.GOMAXPROCS(0))
	elapsed := time.Since(began)
	// On CI a case that cannot run here is a failure: a build must not
	// pass because its runner lacks the sandbox.
	onCI := os.Getenv("CI") == "true"
	failed, skipped := 0, 0
	for _, r := range results {
		if r.Missing != nil && onCI {
			r.Problems, r.Missing = []string{"cannot run here (CI=true counts this as a failure): " + explain(r.Missing)}, nil
		}
		if r.Missing != nil {
			skipped++
			fmt.Fprintf(stdout, "SKIP %s: %s: %s\n", r.File.Path, r.Case.Name, explain(r.Missing))
			continue
		}
		if r.Pass {
			if *verbose {
				fmt.Fprintf(stdout, "ok   %s: %s (%s)\n", r.File.Path, r.Case.Name, r.Duration.Round(time.Millisecond))
			}
			continue
		}
		failed++
		fmt.Fprintf(stdout, "FAIL %s: %s (%s)\n", r.File.Path, r.Case.Name, r.Case.Pos)
		for _, p := range r.Problems {
			fmt.Fprintf(stdout, "    %s\n", p)
		}
	}
	if *coverage {
		for _, cov := range flowtest.CoverageByFile(files, results) {
			fmt.Fprint(stdout, cov.String())
		}
	}
	if *junit != "" {
		if err := flowtest.WriteJUnitFile(*junit, results); err != nil {
			fmt.Fprintf(stderr, "flowrun test: --junit: %v\n", err)
			return exitFailed
		}
	}
	skips := ""
	if skipped > 0 {
		skips = fmt.Sprintf(", %d skipped (not runnable here)", skipped)
	}
	fmt.Fprintf(stdout, "%d passed, %d failed%s, %d cases in %s (%.0f cases/s)\n", len(results)-failed-skipped, failed, skips, len(results),
		elapsed.Round(time.Millisecond), float64(len(results))/max(elapsed.Seconds(), 1e-9))
	if failed > 0 {
		return exitFailed
	}
	return exitOK
}
