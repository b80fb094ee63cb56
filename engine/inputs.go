package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/jsonvalue"
)

// The one rule for reading inputs given as text or as a file (the CLI's
// --input and --inputs, the web UI's form, a batch dataset's fields, MCP
// arguments arrive typed) into the values a pipeline's inputs declare.
// What does not fit is left for the input's schema check to refuse, with
// the error that names the input.

// InputText reads an input given as text by the input's type: as it is
// for a string, else as JSON (as it is when it is not JSON).
func InputText(typ, text string) any {
	if typ == "string" {
		return text
	}
	if v, err := jsonvalue.Decode([]byte(text)); err == nil {
		return v
	}
	return text
}

// InputFile reads an input given as a file: a string input gets the
// file's text, any other the JSON or YAML value the file holds.
func InputFile(typ string, b []byte) (any, error) {
	if typ == "string" {
		return string(b), nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("not JSON or YAML: %v", err)
	}
	if len(doc.Content) == 0 {
		return nil, errors.New("the file is empty")
	}
	return dsl.Plain(&doc), nil
}

// ReadInputs merges a file of inputs (JSON or YAML, a mapping of input
// names to values; none when file is "") and name=value pairs, which win.
// A value written @FILE is that file, read by InputFile.
func ReadInputs(p *dsl.Pipeline, file string, pairs []string) (map[string]any, error) {
	in := map[string]any{}
	if file != "" {
		b, err := readCapped(file)
		if err != nil {
			return nil, &InputError{fmt.Errorf("reading inputs: %w", err)}
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(b, &doc); err != nil {
			return nil, &InputError{fmt.Errorf("reading inputs from %s: %v", file, err)}
		}
		m, ok := dsl.Plain(&doc).(map[string]any)
		if !ok {
			return nil, &InputError{fmt.Errorf("reading inputs from %s: expected a mapping of input names to values", file)}
		}
		in = m
	}
	types := map[string]string{}
	for _, i := range p.Inputs {
		types[i.Name] = i.Type
	}
	for _, s := range pairs {
		name, raw, ok := strings.Cut(s, "=")
		if !ok || name == "" {
			return nil, &InputError{fmt.Errorf("input %q: write it as name=value", s)}
		}
		if file, ok := strings.CutPrefix(raw, "@"); ok && file != "" {
			b, err := readCapped(file)
			if err == nil {
				in[name], err = InputFile(types[name], b)
			}
			if err != nil {
				return nil, &InputError{fmt.Errorf("input %s=@%s: %w", name, file, err)}
			}
			continue
		}
		in[name] = InputText(types[name], raw)
	}
	return in, nil
}

// MaxInputFileBytes caps a file read for inputs: its contents become the
// run's inputs, held in memory and in the run's record.
const MaxInputFileBytes = 64 << 20

// readCapped reads a file of inputs, refusing one over MaxInputFileBytes
// without reading past the cap. It may be a pipe.
func readCapped(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	over := fmt.Errorf("%s is over the %d MiB limit for input files; pass a smaller file", file, MaxInputFileBytes>>20)
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > MaxInputFileBytes {
		return nil, over
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxInputFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	if len(b) > MaxInputFileBytes {
		return nil, over
	}
	return b, nil
}
