package flowtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/dsl"
)

// TestValidateByFileName: a pipeline is checked as a pipeline, a test
// file against the pipeline it tests, and a cassette is skipped unread.
func TestValidateByFileName(t *testing.T) {
	dir := t.TempDir()
	review, err := os.ReadFile(filepath.Join("testdata", "fromrun", "review.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"review.yaml":       string(review),
		"broken.yaml":       "version: 1\nname: broken\nnodes:\n  - id: a\n    sett: {}\n",
		"good.test.yaml":    "pipeline: review.yaml\ncases:\n  - name: c\n    inputs: {topic: owls}\n    mocks: {write: {text: x}}\n",
		"bad.test.yaml":     "pipeline: review.yaml\ncases:\n  - name: c\n    inputs: {topic: owls}\n    mocks: {nosuchnode: {text: x}}\n",
		"run.cassette.yaml": "not: [a pipeline",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name        string
		ok, skipped bool
		diagnostic  string
	}{
		{"review.yaml", true, false, ""},
		{"broken.yaml", false, false, "sett"},
		{"good.test.yaml", true, false, ""},
		{"bad.test.yaml", false, false, "nosuchnode"},
		{"run.cassette.yaml", false, true, ""},
	} {
		ok, skipped, ds := Validate(filepath.Join(dir, c.name), dsl.Options{})
		if ok != c.ok || skipped != c.skipped || (c.diagnostic != "") != (len(ds) > 0) || !strings.Contains(ds.String(), c.diagnostic) {
			t.Errorf("%s: ok %v, skipped %v, diagnostics %s", c.name, ok, skipped, ds)
		}
	}
}
