package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestWorkedExampleRunsOffline runs docs/batch.md's worked example as it
// is written, with no key and no server: its files are the example's
// YAML and JSON blocks, its commands those of its sh blocks, in order,
// and each output block shown after a command is what it prints (but for
// durations and run ids).
func TestWorkedExampleRunsOffline(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "batch.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "### Worked example")
	end := strings.Index(text[start:], "\n### ")
	section := text[start : start+end]
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	dir := t.TempDir()
	store := filepath.Join(dir, "runs.db")
	var last string // what the last command printed
	ran := 0
	for _, b := range regexp.MustCompile("(?s)```([a-z]*)\n(.*?)```").FindAllStringSubmatch(section, -1) {
		lang, body := b[1], b[2]
		switch lang {
		case "yaml", "json":
			first, rest, _ := strings.Cut(body, "\n")
			name := strings.Fields(strings.TrimLeft(first, "#/ "))[0]
			name = strings.TrimSuffix(name, ":")
			if lang == "yaml" {
				rest = body
			}
			writeFile(t, dir, name, rest)
		case "sh":
			for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
				line, _, _ = strings.Cut(line, " #")
				args := shellWords(t, line)[1:]
				for i, a := range args {
					if _, err := os.Stat(filepath.Join(dir, a)); err == nil || i > 0 && args[i-1] == "-o" {
						args[i] = filepath.Join(dir, a)
					}
				}
				code, out, errOut := flowrun(t, append(args, "--store", store)...)
				if code != exitOK {
					t.Fatalf("%s: exit %d\n%s%s", line, code, out, errOut)
				}
				last, ran = out+errOut, ran+1
			}
		case "":
			for _, want := range strings.Split(strings.TrimSpace(body), "\n") {
				if !strings.Contains(normal(last), normal(want)) {
					t.Errorf("the output lacks the documented line %q:\n%s", want, last)
				}
			}
		}
	}
	if ran != 7 {
		t.Errorf("%d commands ran, want the example's 7", ran)
	}
	if _, err := os.Stat(filepath.Join(dir, "report.html")); err != nil {
		t.Errorf("no report: %v", err)
	}
}

var (
	durationRE = regexp.MustCompile(`[0-9.]+(ms|µs)`)
	runIDRE    = regexp.MustCompile(`\d{8}T\d{6}-[0-9a-f]{8}`)
	spacesRE   = regexp.MustCompile(`\s+`)
)

// normal is output as the docs show it whatever the run: durations,
// run ids and column widths left out.
func normal(s string) string {
	s = runIDRE.ReplaceAllString(durationRE.ReplaceAllString(s, "Nms"), "RUN")
	return spacesRE.ReplaceAllString(s, " ")
}

// shellWords splits a command line as sh does, for the words and quotes
// the docs use.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var out []string
	for _, m := range regexp.MustCompile(`"([^"]*)"|(\S+)`).FindAllStringSubmatch(line, -1) {
		out = append(out, m[1]+m[2])
	}
	if len(out) == 0 || out[0] != "flowrun" {
		t.Fatalf("not a flowrun command: %q", line)
	}
	return out
}
