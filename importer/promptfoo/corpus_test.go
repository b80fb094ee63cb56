package promptfoo

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/flowrun/flowrun/dsl"
)

// corpusDir is where the collection of real-world promptfoo
// configurations is, when it is there: FLOWRUN_PROMPTFOO_CORPUS, else a
// promptfoo-real directory beside one that holds this one.
func corpusDir() string {
	if d := os.Getenv("FLOWRUN_PROMPTFOO_CORPUS"); d != "" {
		return d
	}
	for dir, _ := filepath.Abs("."); filepath.Dir(dir) != dir; dir = filepath.Dir(dir) {
		if found, _ := filepath.Glob(filepath.Join(dir, "*", "promptfoo-real", "MANIFEST.tsv")); len(found) > 0 {
			return filepath.Dir(found[0])
		}
	}
	return "promptfoo-real"
}

// corpusEntry is one configuration of the corpus and the features its
// MANIFEST.tsv lists.
type corpusEntry struct {
	dir, config string
	root        string // its repository, which the import may read from
	features    []string
}

func readManifest(t *testing.T, dir string) []corpusEntry {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "MANIFEST.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.Comma, r.LazyQuotes, r.FieldsPerRecord = '\t', true, -1
	rows, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []corpusEntry
	for _, row := range rows[1:] {
		if len(row) < 6 {
			continue
		}
		out = append(out, corpusEntry{dir: row[0], config: filepath.Join(dir, row[0], row[2]), root: filepath.Join(dir, row[0]), features: strings.Split(row[5], ",")})
	}
	return out
}

var positioned = regexp.MustCompile(`:\d+:\d+: `)

// corpusOutcome is what the importer made of one configuration.
type corpusOutcome struct {
	converted bool // files written; else refused
	listed    bool // every loss (or the refusal) names file:line:col
	runs      bool // every item gives every input of every pipeline, of its type
	why       string
	silent    []string // what the oracle says was changed without a word
}

func importOne(t *testing.T, e corpusEntry, oracle *oracleConfig) (out corpusOutcome) {
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: panic: %v", e.dir, r)
			out = corpusOutcome{why: "panic"}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := ConvertWithin(ctx, e.config, e.root)
	if ctx.Err() != nil {
		t.Errorf("%s: did not finish in a minute", e.dir)
		return corpusOutcome{why: "hang"}
	}
	if err != nil {
		return corpusOutcome{listed: positioned.MatchString(err.Error()), why: err.Error()}
	}
	out = corpusOutcome{converted: true, listed: true, runs: true}
	for _, p := range res.Problems {
		if p.Line <= 0 || p.Col <= 0 {
			t.Errorf("%s: a loss without its position: %s", e.dir, p)
			out.listed = false
		}
	}
	dir := filepath.Join(t.TempDir(), e.dir)
	if _, err := res.Write(dir); err != nil {
		t.Fatalf("%s: %v", e.dir, err)
	}
	var items []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(res.Files[Dataset])), "\n") {
		var m map[string]any
		if line != "" && json.Unmarshal([]byte(line), &m) == nil {
			items = append(items, m)
		}
	}
	for _, name := range append(slicesOf(res.Pipelines), judgeIf(res)...) {
		p, diags := dsl.Load(filepath.Join(dir, name))
		if p == nil {
			t.Errorf("%s: %s does not validate:\n%v", e.dir, name, diags)
			out.runs, out.why = false, "invalid pipeline"
			continue
		}
		if name == Judge {
			continue
		}
		for _, in := range p.Inputs {
			for i, it := range items {
				if v, ok := it[in.Name]; !ok || !fits(in.Type, v) {
					out.runs, out.why = false, fmt.Sprintf("item %d: input %s missing or not %s", i+1, in.Name, in.Type)
				}
			}
		}
	}
	if len(items) == 0 {
		out.runs, out.why = false, "no item"
	}
	if why := literalReference(res, filepath.Dir(e.config)); why != "" {
		out.runs, out.why = false, why
	}
	if oracle != nil {
		out.silent = silent(*oracle, readBack(res, e.config, items))
	}
	return out
}

// literalReference says where a file reference was kept as text, to be
// sent to the model as it is: a file:// value, or a prompt that is the
// name of a file next to the configuration. An assert kept only to show
// that it was not converted (a script in a file) is sent nowhere.
func literalReference(res *Result, dir string) string {
	for name, b := range res.Files {
		if name == Dataset {
			b = withoutUnconverted(b)
		}
		if strings.Contains(string(b), "file://") {
			return name + " holds a file:// reference as text"
		}
		var doc struct {
			Nodes []struct {
				LLM struct{ Prompt string } `yaml:"llm"`
			} `yaml:"nodes"`
		}
		if yaml.Unmarshal(b, &doc) != nil {
			continue
		}
		for _, n := range doc.Nodes {
			if p := strings.TrimSpace(n.LLM.Prompt); p != "" && !strings.Contains(p, "\n") {
				if fi, err := os.Stat(filepath.Join(dir, p)); err == nil && fi.Mode().IsRegular() {
					return name + ": the prompt is the file name " + p
				}
			}
		}
	}
	return ""
}

// withoutUnconverted is a dataset without its asserts that were not
// converted.
func withoutUnconverted(b []byte) []byte {
	var out []byte
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var item map[string]any
		if json.Unmarshal([]byte(line), &item) != nil {
			return b
		}
		asserts, _ := item["asserts"].([]any)
		item["asserts"] = slices.DeleteFunc(asserts, func(a any) bool { return a.(map[string]any)["not_converted"] != nil })
		line, _ := json.Marshal(item)
		out = append(append(out, line...), '\n')
	}
	return out
}

func slicesOf(s []string) []string { return append([]string(nil), s...) }

func judgeIf(res *Result) []string {
	if res.Files[Judge] != nil {
		return []string{Judge}
	}
	return nil
}

func fits(typ string, v any) bool {
	got := jsonType(v)
	return typ == "" || got == typ || typ == "number" && got == "integer"
}

// TestCorpus imports every configuration of the corpus, when it is here:
// none may panic or hang, every pipeline written must validate and every
// loss name its position. It prints how many give something that runs,
// overall and per feature.
func TestCorpus(t *testing.T) {
	dir := corpusDir()
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST.tsv")); err != nil {
		t.Skipf("no corpus of promptfoo configurations at %s (set FLOWRUN_PROMPTFOO_CORPUS): %v", dir, err)
	}
	entries := readManifest(t, dir)
	oracle := readOracle(t, dir)
	type tally struct{ n, runs int }
	features := map[string]*tally{}
	total := tally{}
	refused, silentConfigs, silentUnits := 0, 0, 0
	for _, e := range entries {
		var want *oracleConfig
		if o, ok := oracle[e.dir]; ok {
			want = &o
		}
		o := importOne(t, e, want)
		ok := o.converted && o.listed && o.runs && len(o.silent) == 0
		total.n++
		if ok {
			total.runs++
		}
		if !o.converted {
			refused++
		}
		if len(o.silent) > 0 {
			silentConfigs++
			silentUnits += len(o.silent)
			o.why = strings.TrimSpace(o.why + fmt.Sprintf(" %d changed without a word: %s", len(o.silent), strings.Join(o.silent, "; ")))
		}
		t.Logf("%-55s %-5v %s", e.dir, ok, firstLine(o.why))
		for _, f := range e.features {
			if features[f] == nil {
				features[f] = &tally{}
			}
			features[f].n++
			if ok {
				features[f].runs++
			}
		}
	}
	var names []string
	for f := range features {
		names = append(names, f)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d configurations convert, with every loss listed, into pipelines that validate and a dataset that gives them every input; %d refused with their reasons; %d configurations with %d parts changed without a word (by the oracle)\n\n| feature | configurations | convert |\n|---|---|---|\n", total.runs, total.n, refused, silentConfigs, silentUnits)
	for _, f := range names {
		fmt.Fprintf(&b, "| %s | %d | %d |\n", f, features[f].n, features[f].runs)
	}
	t.Log("\n" + b.String())
	// The figures docs/batch.md gives: a change that converts fewer, or
	// changes a part without a word, must say so there.
	if total.runs < corpusConverts || silentConfigs > 0 {
		t.Errorf("%d of %d configurations convert and %d change parts without a word; docs/batch.md says %d and 0", total.runs, total.n, silentConfigs, corpusConverts)
	}
}

// corpusConverts is how many of the corpus's configurations convert, as
// docs/batch.md says.
const corpusConverts = 44

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
