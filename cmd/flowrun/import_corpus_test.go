package main

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
)

var (
	batchSummary = regexp.MustCompile(`completed: (\d+) items?, (\d+) completed, (\d+) failed`)
	modelServer  = regexp.MustCompile(`(?m)^(\s+)(base_url|api_key_env): .*$`)
	// endpointURL is an http tool's url, an application's endpoint.
	endpointURL = regexp.MustCompile(`(?m)^(\s+url: )https?://[^/\s]+`)
)

// TestImportCorpusRuns imports every configuration of the corpus of
// real-world promptfoo configurations, when it is here
// (FLOWRUN_PROMPTFOO_CORPUS, else a promptfoo-real directory beside one
// that holds this one), and runs every pipeline written over its dataset against
// a local fake server (each model's server pointed at it): it counts the
// configurations whose every item completes.
func TestImportCorpusRuns(t *testing.T) {
	dir := os.Getenv("FLOWRUN_PROMPTFOO_CORPUS")
	for up, _ := filepath.Abs("."); dir == "" && filepath.Dir(up) != up; up = filepath.Dir(up) {
		if found, _ := filepath.Glob(filepath.Join(up, "*", "promptfoo-real", "MANIFEST.tsv")); len(found) > 0 {
			dir = filepath.Dir(found[0])
		}
	}
	f, err := os.Open(filepath.Join(dir, "MANIFEST.tsv"))
	if err != nil {
		t.Skipf("no corpus of promptfoo configurations at %s (set FLOWRUN_PROMPTFOO_CORPUS): %v", dir, err)
	}
	r := csv.NewReader(f)
	r.Comma, r.LazyQuotes, r.FieldsPerRecord = '\t', true, -1
	rows, err := r.ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	srv := llmtest.New(t)
	srv.Handle(func(req llmtest.Request) llmtest.Reply {
		if req.Body["response_format"] != nil {
			return llmtest.Reply{Text: `{"pass": true, "score": 1, "reason": "a fake judge passes everything"}`}
		}
		return llmtest.Reply{Text: `{"answer": "ok"}`}
	})
	useModel(t, srv)
	// An application behind an HTTP endpoint (promptfoo's http provider)
	// answers JSON whatever it is sent.
	var endpointCalls atomic.Int32
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		endpointCalls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"answer": "ok"}`)
	}))
	defer app.Close()
	runs := 0
	// unscored counts the items with no assert left to check, which
	// promptfoo would have passed for want of a failing one.
	unscored, items, unscoredConfigs := 0, 0, 0
	for _, row := range rows[1:] {
		if len(row) < 3 {
			continue
		}
		out := filepath.Join(t.TempDir(), "imported")
		code, stdout, stderr := flowrun(t, "import", "promptfoo", filepath.Join(dir, row[0], row[2]), "--root", filepath.Join(dir, row[0]), "-o", out)
		if code != exitOK {
			t.Logf("%-55s refused: %s", row[0], firstLineOf(stderr))
			continue
		}
		names, _ := filepath.Glob(filepath.Join(out, "*.yaml"))
		for _, name := range names {
			b, _ := os.ReadFile(name)
			b = modelServer.ReplaceAllFunc(b, func(line []byte) []byte {
				m := modelServer.FindSubmatch(line)
				if string(m[2]) == "base_url" {
					return []byte(string(m[1]) + "base_url: " + srv.URL)
				}
				return []byte(string(m[1]) + "api_key_env: OPENAI_API_KEY")
			})
			b = endpointURL.ReplaceAll(b, []byte("${1}"+app.URL))
			if err := os.WriteFile(name, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ok, why, some := true, "", false
		for _, line := range strings.Split(stdout, "\n") {
			args := strings.Fields(line)
			if len(args) < 5 || args[0] != "flowrun" || args[1] != "batch" {
				continue
			}
			args = append(args[1:], "--store", filepath.Join(out, "runs.db"))
			code, _, berr := flowrun(t, args...)
			m := batchSummary.FindStringSubmatch(berr)
			if code != exitOK || m == nil || m[3] != "0" {
				ok, why = false, firstLineOf(berr)
				if m != nil {
					why = m[0]
				}
				break
			}
			_, jsonl, _ := flowrun(t, "batch", "show", "last", "--store", filepath.Join(out, "runs.db"), "--format", "jsonl")
			for _, rec := range strings.Split(strings.TrimSpace(jsonl), "\n") {
				items++
				if strings.Contains(rec, `"class":"unscored"`) {
					unscored, some = unscored+1, true
				}
			}
		}
		if ok {
			runs++
		}
		if some {
			unscoredConfigs++
		}
		t.Logf("%-55s runs: %v %s", row[0], ok, why)
	}
	t.Logf("%d of %d configurations import and run every item against a local fake server (%d calls to an application's endpoint); %d of their %d item runs unscored (no assert left to check), in %d configurations",
		runs, len(rows)-1, endpointCalls.Load(), unscored, items, unscoredConfigs)
	// docs/batch.md gives this figure: a change that runs fewer must say
	// so there.
	if runs < corpusRuns {
		t.Errorf("%d configurations import and run every item; docs/batch.md says %d", runs, corpusRuns)
	}
}

// corpusRuns is how many of the corpus's configurations import and run
// every item, as docs/batch.md says.
const corpusRuns = 44

func firstLineOf(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
