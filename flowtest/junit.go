package flowtest

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/flowrun/flowrun/internal/junit"
)

// WriteJUnit writes results as JUnit XML: one testsuite per test file.
func WriteJUnit(w io.Writer, results []*Result) error {
	var suites []junit.Suite
	index := map[string]int{}
	for _, r := range results {
		i, ok := index[r.File.Path]
		if !ok {
			i = len(suites)
			index[r.File.Path] = i
			suites = append(suites, junit.Suite{Name: r.File.Path})
		}
		c := junit.Case{Name: r.Case.Name, Classname: r.File.Path, Seconds: r.Duration.Seconds()}
		switch {
		case r.Missing != nil:
			c.Skipped = r.Missing.Error()
		case !r.Pass:
			c.Failure = &junit.Problem{Message: r.Problems[0], Text: strings.Join(r.Problems, "\n")}
		}
		suites[i].Cases = append(suites[i].Cases, c)
	}
	return junit.Write(w, suites)
}

// WriteJUnitFile writes results as JUnit XML (see WriteJUnit) to the file
// at path.
func WriteJUnitFile(path string, results []*Result) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	err = WriteJUnit(out, results)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
