package flowtest

import (
	"strings"

	"github.com/flowrun/flowrun/dsl"
)

// Validate checks one YAML file by what its name says it is: a test file
// (*.test.yaml) against the pipeline it tests (see Load), a pipeline
// against the schema and every rule (dsl.LoadWith with o). A cassette
// (*.cassette.yaml) is neither and is skipped, so that a glob over a
// directory of pipelines checks the pipelines only. ok says the file
// loads; ds may hold warnings even then.
func Validate(path string, o dsl.Options) (ok, skipped bool, ds dsl.Diagnostics) {
	switch {
	case strings.HasSuffix(path, ".cassette.yaml"):
		return false, true, nil
	case strings.HasSuffix(path, ".test.yaml"):
		f, ds := Load(path)
		return f != nil, false, ds
	}
	p, ds := dsl.LoadWith(path, o)
	return p != nil, false, ds
}
