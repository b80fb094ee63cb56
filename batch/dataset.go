package batch

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/store"
)

// Item is one entry of a dataset.
type Item struct {
	Index int    // position in the dataset, from 0
	Key   string // stable name: a file name, "line N", "row N", "item N" or the id field
	Where string // where it is written, for messages: data.jsonl:3
	// Value is the entry as read: for every format but a directory of
	// files it is an object of fields (a CSV row's values are text).
	Value any
	// Err is what is wrong with the entry as written: the item fails
	// with class "dataset" and the rest of the batch runs.
	Err error
	// File says the entry is a whole file of a directory dataset.
	File bool
}

// Fields is the item as a score sees it (item.<field>): its fields, or
// none when the entry is not an object.
func (it *Item) Fields() map[string]any {
	m, _ := it.Value.(map[string]any)
	if m == nil {
		return map[string]any{}
	}
	return m
}

// Dataset is a dataset read whole.
type Dataset struct {
	Path  string
	Hash  string // sha256 of its bytes (a directory: of its files' names and bytes)
	Items []*Item
}

// maxDatasetFileBytes caps one dataset file (or one file of a directory).
const maxDatasetFileBytes = 256 << 20

// ReadDataset reads a dataset: a JSONL file (.jsonl, .ndjson: one JSON
// object a line), a CSV file (.csv: a header row, then one item a row), a
// JSON or YAML list (.json, .yaml, .yml), or a directory of .json files,
// one item each, in name order. A problem with one entry (a line that is
// not JSON, a row with the wrong number of fields) is that item's Err; an
// error is returned only when the dataset cannot be read at all.
func ReadDataset(path string) (*Dataset, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	if fi.IsDir() {
		return readDir(path)
	}
	b, err := readCapped(path)
	if err != nil {
		return nil, err
	}
	d := &Dataset{Path: path, Hash: hashOf(b)}
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".jsonl", ".ndjson":
		d.Items = readJSONL(path, b)
	case ".csv":
		d.Items, err = readCSV(path, b)
	case ".json", ".yaml", ".yml":
		d.Items, err = readList(path, b)
	default:
		return nil, fmt.Errorf("dataset %s: unknown format %q; use .jsonl, .csv, .json or .yaml (a list), or a directory of .json files", path, ext)
	}
	if err != nil {
		return nil, err
	}
	assignKeys(d.Items)
	return d, nil
}

func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func readCapped(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDatasetFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("dataset: reading %s: %w", path, err)
	}
	if len(b) > maxDatasetFileBytes {
		return nil, fmt.Errorf("dataset %s is over %d MiB: split it into several files", path, maxDatasetFileBytes>>20)
	}
	return b, nil
}

func readDir(dir string) (*Dataset, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	d := &Dataset{Path: dir}
	h := sha256.New()
	for _, e := range entries {
		if e.IsDir() || !strings.EqualFold(filepath.Ext(e.Name()), ".json") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := readCapped(path)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", e.Name(), len(b))
		h.Write(b)
		it := &Item{Index: len(d.Items), Key: strings.TrimSuffix(e.Name(), filepath.Ext(e.Name())), Where: path, File: true}
		if it.Value, err = jsonvalue.Decode(b); err != nil {
			it.Err = fmt.Errorf("%s: not JSON: %s", path, err)
		}
		d.Items = append(d.Items, it)
	}
	if len(d.Items) == 0 {
		return nil, fmt.Errorf("dataset %s: no .json files in the directory", dir)
	}
	d.Hash = hex.EncodeToString(h.Sum(nil))
	return d, nil
}

func readJSONL(path string, b []byte) []*Item {
	var items []*Item
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, maxDatasetFileBytes)
	for line := 1; sc.Scan(); line++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		it := &Item{Index: len(items), Key: fmt.Sprintf("line %d", line), Where: fmt.Sprintf("%s:%d", path, line)}
		v, err := jsonvalue.Decode(text)
		switch {
		case err != nil:
			it.Err = fmt.Errorf("%s: not JSON: %s", it.Where, err)
		default:
			it.Value = v
			if _, ok := v.(map[string]any); !ok {
				it.Err = fmt.Errorf("%s: a line must be a JSON object of fields, not %s", it.Where, kindOf(v))
			}
		}
		items = append(items, it)
	}
	return items
}

func readCSV(path string, b []byte) ([]*Item, error) {
	r := csv.NewReader(bytes.NewReader(b))
	r.FieldsPerRecord = -1 // checked per row, so that one bad row fails alone
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("dataset %s: no header row: %w", path, err)
	}
	var items []*Item
	for row := 1; ; row++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line, _ := r.FieldPos(0)
		it := &Item{Index: len(items), Key: fmt.Sprintf("row %d", row), Where: fmt.Sprintf("%s:%d (row %d)", path, line, row)}
		items = append(items, it)
		var pe *csv.ParseError
		switch {
		case errors.As(err, &pe):
			it.Where = fmt.Sprintf("%s:%d (row %d)", path, pe.Line, row)
			it.Err = fmt.Errorf("%s: %v", it.Where, pe.Err)
			continue
		case err != nil:
			return nil, fmt.Errorf("dataset %s: %w", path, err)
		case len(rec) != len(header):
			it.Err = fmt.Errorf("%s: %d fields, but the header has %d (%s)", it.Where, len(rec), len(header), strings.Join(header, ", "))
			continue
		}
		fields := make(map[string]any, len(rec))
		for i, name := range header {
			fields[name] = rec[i]
		}
		it.Value = fields
	}
	return items, nil
}

func readList(path string, b []byte) ([]*Item, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("dataset %s: not JSON or YAML: %v", path, err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("dataset %s: expected a list of items", path)
	}
	var items []*Item
	for i, n := range doc.Content[0].Content {
		it := &Item{Index: i, Key: fmt.Sprintf("item %d", i+1), Where: fmt.Sprintf("%s:%d (item %d)", path, n.Line, i+1)}
		it.Value = dsl.Plain(n)
		if _, ok := it.Value.(map[string]any); !ok {
			it.Err = fmt.Errorf("%s: an item must be an object of fields, not %s", it.Where, kindOf(it.Value))
		}
		items = append(items, it)
	}
	return items, nil
}

// assignKeys names items by their "id" field when every item has a
// distinct one; a broken entry keeps its line or row.
func assignKeys(items []*Item) {
	seen := map[string]bool{}
	for _, it := range items {
		if it.Err != nil {
			continue
		}
		id, ok := it.Fields()["id"]
		if !ok || id == nil {
			return
		}
		k := dsl.Stringify(id)
		if k == "" || seen[k] {
			return
		}
		seen[k] = true
	}
	for _, it := range items {
		if it.Err == nil {
			it.Key = dsl.Stringify(it.Fields()["id"])
		}
	}
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case []any:
		return "a list"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	}
	return "a number"
}

// Inputs are the pipeline inputs an item gives. mapping names, per input,
// the field it comes from (--map input=field); other inputs take the field
// of their own name. A file of a directory dataset with no field naming
// an input (an ARC task file: {train, test}) is given whole to one input:
// the only input without a default, or, when all have defaults, the only
// object input. CSV text is parsed as JSON for an input that is
// not a string.
func Inputs(p *dsl.Pipeline, it *Item, mapping map[string]string) (map[string]any, error) {
	if it.Err != nil {
		return nil, it.Err
	}
	fields, isObject := it.Value.(map[string]any)
	in := map[string]any{}
	matched := false
	for _, input := range p.Inputs {
		field, mapped := mapping[input.Name]
		if !mapped {
			field = input.Name
		}
		v, ok := fields[field]
		if !ok {
			if mapped {
				return nil, fmt.Errorf("%s: no field %q for input %q (mapped %s=%s)%s; fields: %s", it.Where, field, input.Name, input.Name, field, dsl.Suggest(field, keys(fields)), fieldList(fields))
			}
			continue
		}
		matched = true
		if s, ok := v.(string); ok && input.Type != "" {
			v = engine.InputText(input.Type, s)
		}
		in[input.Name] = v
	}
	required := requiredInputs(p)
	if target := wholeInput(p, required); it.File && !matched && len(mapping) == 0 && target != "" {
		return map[string]any{target: it.Value}, nil
	}
	for _, name := range required {
		if _, ok := in[name]; !ok {
			what := "fields: " + fieldList(fields)
			if !isObject {
				what = "it is " + kindOf(it.Value)
			}
			return nil, fmt.Errorf("%s: no field for the required input %q (%s); map a field of the items to it", it.Where, name, what)
		}
	}
	return in, nil
}

// wholeInput is the input a whole file goes to: the one input without a
// default, or, when every input has one, the one object input.
func wholeInput(p *dsl.Pipeline, required []string) string {
	if len(required) == 1 {
		return required[0]
	}
	if len(required) > 0 {
		return ""
	}
	var objects []string
	for _, in := range p.Inputs {
		if in.Type == "object" {
			objects = append(objects, in.Name)
		}
	}
	if len(objects) == 1 {
		return objects[0]
	}
	return ""
}

func requiredInputs(p *dsl.Pipeline) []string {
	var out []string
	for _, in := range p.Inputs {
		if !in.HasDefault {
			out = append(out, in.Name)
		}
	}
	return out
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func fieldList(m map[string]any) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(keys(m), ", ")
}

// ParseMap reads --map input=field flags, checking each names an input of p.
func ParseMap(p *dsl.Pipeline, flags []string) (map[string]string, error) {
	names := make([]string, len(p.Inputs))
	for i, in := range p.Inputs {
		names[i] = in.Name
	}
	out := map[string]string{}
	for _, f := range flags {
		input, field, ok := strings.Cut(f, "=")
		if !ok || input == "" || field == "" {
			return nil, fmt.Errorf("input mapping %q: write it as input=field", f)
		}
		if !slices.Contains(names, input) {
			return nil, fmt.Errorf("input mapping %q: the pipeline has no input %q%s (inputs: %s)", f, input, dsl.Suggest(input, names), strings.Join(names, ", "))
		}
		out[input] = field
	}
	return out, nil
}

// OfflineCassette is the cassette a batch of p over dataset replays when
// p, with the --model overrides, calls a model that has neither a key nor
// an endpoint in the environment lookupEnv reads: the one the dataset
// ships (see Cassette); "" when p needs none or the dataset ships none.
func OfflineCassette(dataset string, p *dsl.Pipeline, models []string, lookupEnv func(string) (string, bool)) string {
	if !engine.NeedsEndpoint(p, models, lookupEnv) {
		return ""
	}
	return Cassette(dataset, p.Path)
}

// ReadSelected reads the dataset at path and picks its items as sel
// says; a selection of no item is an error.
func ReadSelected(path string, sel Selection) (*Dataset, []*Item, error) {
	d, err := ReadDataset(path)
	if err != nil {
		return nil, nil, err
	}
	items, err := Select(d.Items, sel)
	if err != nil {
		return nil, nil, err
	}
	if len(items) == 0 {
		return nil, nil, fmt.Errorf("no item of %s is selected", path)
	}
	return d, items, nil
}

// NewRecord is the record of a new batch of pipeline p over dataset d,
// naming both as given and by absolute path and hash.
func NewRecord(p *dsl.Pipeline, d *Dataset) *store.Batch {
	pipelineAbs, _ := filepath.Abs(p.Path)
	return &store.Batch{Pipeline: p.Path, PipelineAbs: pipelineAbs, PipelineName: p.Name, PipelineHash: p.Hash,
		Dataset: d.Path, DatasetHash: d.Hash}
}

// Cassette is the cassette a dataset ships for offline runs of
// the pipeline file named pipeline: in a dataset directory
// PIPELINE.cassette.yaml, else cassette.yaml; beside a dataset file
// NAME.jsonl, NAME.PIPELINE.cassette.yaml, else NAME.cassette.yaml; ""
// when there is none. One dataset can so serve several pipelines offline.
func Cassette(dataset, pipeline string) string {
	base := strings.TrimSuffix(filepath.Base(pipeline), filepath.Ext(pipeline))
	name := strings.TrimSuffix(dataset, filepath.Ext(dataset))
	candidates := []string{name + "." + base + ".cassette.yaml", name + ".cassette.yaml"}
	if fi, err := os.Stat(dataset); err == nil && fi.IsDir() {
		candidates = []string{filepath.Join(dataset, base+".cassette.yaml"), filepath.Join(dataset, "cassette.yaml")}
	}
	for _, c := range candidates {
		if _, err := os.Stat(c); err == nil {
			return c
		}
	}
	return ""
}
