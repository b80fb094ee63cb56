package promptfoo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// configIn writes a configuration into a new directory under a new
// directory (so that ../ names a file next to it) and returns its path.
func configIn(t *testing.T, src string) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "cfg", "promptfooconfig.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A prompt file outside the configuration's directory (by ../, by an
// absolute path or by a symbolic link) is listed where it is named and
// not read; one inside is converted.
func TestConvertReadsNoFileOutsideItsDirectory(t *testing.T) {
	cfg := configIn(t, `prompts:
  - file://../secret.txt
  - file://SECRET_ABS
  - file://link.txt
  - file://inside.txt
`)
	dir := filepath.Dir(cfg)
	secret := filepath.Join(filepath.Dir(dir), "secret.txt")
	writeFile(t, secret, "TOPSECRET {{x}}")
	writeFile(t, cfg, strings.Replace(mustRead(t, cfg), "SECRET_ABS", secret, 1))
	writeFile(t, filepath.Join(dir, "inside.txt"), "Say {{x}}")
	if err := os.Symlink(secret, filepath.Join(dir, "link.txt")); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	res, err := Convert(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := problems(res)
	for _, want := range []string{
		":2:5: prompt ../secret.txt: not read: it is outside the configuration's directory",
		":3:5: prompt " + secret + ": not read: it is outside the configuration's directory",
		":4:5: prompt link.txt: not read: it is outside the configuration's directory",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	for name, b := range res.Files {
		if strings.Contains(string(b), "TOPSECRET") {
			t.Errorf("%s holds the file outside:\n%s", name, b)
		}
	}
	if len(res.Pipelines) != 1 || !strings.Contains(string(res.Files["pipeline.yaml"]), "Say ${{ inputs.x }}") {
		t.Errorf("pipelines %v:\n%s", res.Pipelines, res.Files["pipeline.yaml"])
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A prompt file larger than the cap is listed, not read; so is a
// configuration. (The files are sparse: nothing that large is written.)
func TestConvertCapsWhatItReads(t *testing.T) {
	cfg := configIn(t, "prompts: [file://big.txt, 'Say {{x}}']\n")
	big := filepath.Join(filepath.Dir(cfg), "big.txt")
	writeFile(t, big, "")
	if err := os.Truncate(big, maxFileSize+1); err != nil {
		t.Fatal(err)
	}
	res, err := Convert(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := problems(res), ":1:11: prompt big.txt: not read: file too large: the file holds 8388609 bytes, over the 8 MiB cap"; !strings.Contains(got, want) {
		t.Errorf("problems lack %q:\n%s", want, got)
	}
	if err := os.Truncate(cfg, maxFileSize+1); err != nil {
		t.Fatal(err)
	}
	if _, err := Convert(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "over the 8 MiB cap") {
		t.Errorf("a configuration larger than the cap: %v", err)
	}
}

// A cancelled context ends the conversion before it reads anything.
func TestConvertStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Convert(ctx, filepath.Join("testdata", "simple_test", "promptfooconfig.yaml"))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// Write writes through no symbolic link: one at a file's place, even a
// dangling one, is refused as the file being there, and nothing is
// written where it points.
func TestWriteFollowsNoSymlink(t *testing.T) {
	res := convert(t, "getting_started")
	root := t.TempDir()
	dir, outside := filepath.Join(root, "out"), filepath.Join(root, "outside")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "x"), filepath.Join(dir, Dataset)); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	written, err := res.Write(dir)
	var exists *ExistsError
	if !errors.As(err, &exists) || exists.Path != filepath.Join(dir, Dataset) || len(written) != 0 {
		t.Errorf("Write over a dangling symlink: %v, wrote %v", err, written)
	}
	if err == nil || !strings.Contains(err.Error(), "a symbolic link") {
		t.Errorf("the error says what is there: %v", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("wrote %d files outside the output directory", len(entries))
	}
}

// A configuration that names a file beside its own directory is read
// only when the import may read from a directory that holds both; one
// outside that directory is still refused, and so is a directory that
// does not hold the configuration.
func TestConvertWithinReadsBesideTheConfiguration(t *testing.T) {
	cfg := configIn(t, "prompts: [file://../prompts/ask.txt]\ntests: [{vars: {q: why}}]\n")
	root := filepath.Dir(filepath.Dir(cfg))
	if err := os.Mkdir(filepath.Join(root, "prompts"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "prompts", "ask.txt"), "Answer: {{q}}")
	if _, err := Convert(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "outside the configuration's directory") || !strings.Contains(err.Error(), "--root") {
		t.Errorf("without a root: %v", err)
	}
	res, err := ConvertWithin(context.Background(), cfg, root)
	if err != nil || !strings.Contains(string(res.Files["pipeline.yaml"]), "Answer: ${{ inputs.q }}") {
		t.Fatalf("within %s: %v", root, err)
	}
	outside := configIn(t, "prompts: [file://../../etc/passwd]\n")
	if _, err := ConvertWithin(context.Background(), outside, filepath.Dir(filepath.Dir(outside))); err == nil || !strings.Contains(err.Error(), "the directory the import reads from") {
		t.Errorf("a file outside the root: %v", err)
	}
	if _, err := ConvertWithin(context.Background(), cfg, t.TempDir()); err == nil || !strings.Contains(err.Error(), "does not hold it") {
		t.Errorf("a root that does not hold the configuration: %v", err)
	}
}
