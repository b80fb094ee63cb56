package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDefaultRefineUseImages: with use_images the first dreamer request
// carries every training pair as two PNG pictures (input, output).
func TestDefaultRefineUseImages(t *testing.T) {
	m := newFakeModel(t, (&refineScript{coders: []string{fenced(refineRightCode)}}).reply)
	code, _, stderr := flowrun(t, shippedPath("default_refine.yaml"), "--input", "use_images=true")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	first := string(m.requests()[0].Raw)
	if !strings.Contains(first, "You study ARC puzzles") {
		t.Fatalf("the first request is not the dreamer's")
	}
	// The default task has two training pairs: four pictures.
	if n := strings.Count(first, `"url":"data:image/png;base64,`); n != 4 {
		t.Fatalf("%d PNG images in the dreamer's first request, want 4", n)
	}
	// Without use_images, none.
	m2 := newFakeModel(t, (&refineScript{coders: []string{fenced(refineRightCode)}}).reply)
	if code, _, stderr := flowrun(t, shippedPath("default_refine.yaml")); code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if strings.Contains(string(m2.requests()[0].Raw), "data:image/png") {
		t.Fatal("images sent without use_images")
	}
}

// TestDefaultRefineTransformTimesOut: a transform that never returns is
// stopped at the sandbox timeout, reported, and the loop goes on.
func TestDefaultRefineTransformTimesOut(t *testing.T) {
	// A copy of the pipeline with a short sandbox timeout, beside its prompts.
	dir := t.TempDir()
	src, err := os.ReadFile("../../pipelines/default_refine.yaml")
	if err != nil {
		t.Fatal(err)
	}
	yaml := strings.Replace(string(src), "sandbox: {timeout: 10s}", "sandbox: {timeout: 1s}", 1)
	if yaml == string(src) {
		t.Fatal("the pipeline's sandbox timeout line changed; update this test")
	}
	if err := os.WriteFile(filepath.Join(dir, "default_refine.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	// Copies, not a link: read_file and render refuse a link out of the
	// pipeline's directory.
	prompts, _ := filepath.Glob("../../pipelines/prompts/arc_*.md")
	if err := os.Mkdir(filepath.Join(dir, "prompts"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range prompts {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "prompts", filepath.Base(p)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	loops := "def transform(grid):\n    while True:\n        pass"
	out, _ := liveRun(t, filepath.Join(dir, "default_refine.yaml"), (&refineScript{coders: []string{fenced(loops), fenced(refineRightCode)}}).reply)
	sc := scores(t, out)
	if out["solved_train"] != true || len(sc) != 2 || !strings.HasPrefix(sc[0]["error"].(string), "timeout:") {
		t.Fatalf("outputs %v", out)
	}
}
