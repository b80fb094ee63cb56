package dsl

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"
	"gopkg.in/yaml.v3"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/jsonvalue"
)

var (
	schemaOnce     sync.Once
	schemaJSON     []byte
	compiledSchema *jsonschema.Schema
	schemaDoc      map[string]any
)

const schemaURL = "pipeline.schema.json"

// baseSchema is the pipeline schema without the node kinds: the top-level
// sections, the common node fields and the shared definitions.
//
//go:embed schema_base.json
var baseSchema []byte

// Schema is the JSON schema (draft 2020-12) of a pipeline file: the base
// with every node kind's fragment. It is the one definition of the syntax:
// the loader validates against it, and schemas/pipeline.schema.json is a
// copy that go generate writes for editors.
func Schema() []byte {
	pipelineSchema()
	return schemaJSON
}

func buildSchema() map[string]any {
	var doc map[string]any
	if err := json.Unmarshal(baseSchema, &doc); err != nil {
		panic(fmt.Sprintf("dsl/schema_base.json: %v", err))
	}
	defs := doc["$defs"].(map[string]any)
	retryOn := defs["retry"].(map[string]any)["properties"].(map[string]any)["retry_on"].(map[string]any)
	var classes []any
	for _, c := range errclass.Retryable() {
		classes = append(classes, string(c))
	}
	retryOn["items"].(map[string]any)["enum"] = classes
	props := defs["node"].(map[string]any)["properties"].(map[string]any)
	for _, s := range Kinds() {
		var fragment map[string]any
		if err := json.Unmarshal([]byte(s.Schema), &fragment); err != nil {
			panic(fmt.Sprintf("node kind %s: schema: %v", s.Kind, err))
		}
		defs["kind_"+string(s.Kind)] = fragment
		props[string(s.Kind)] = map[string]any{"$ref": "#/$defs/kind_" + string(s.Kind), "description": s.Summary}
	}
	withMaxima(doc)
	return doc
}

func pipelineSchema() (*jsonschema.Schema, map[string]any) {
	schemaOnce.Do(func() {
		schemaDoc = buildSchema()
		b, err := json.MarshalIndent(schemaDoc, "", "  ")
		if err != nil {
			panic(err)
		}
		schemaJSON = append(b, '\n')
		c := jsonschema.NewCompiler()
		c.Draft = jsonschema.Draft2020
		if err := c.AddResource(schemaURL, bytes.NewReader(schemaJSON)); err != nil {
			panic(fmt.Sprintf("pipeline schema: %v", err))
		}
		compiledSchema = c.MustCompile(schemaURL)
	})
	return compiledSchema, schemaDoc
}

func (f *file) checkSchema(doc any, ps *pointers) {
	s, _ := pipelineSchema()
	err := s.Validate(doc)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return
	}
	for _, leaf := range jsonvalue.LeafErrors(ve) {
		f.schemaErrs = append(f.schemaErrs, leaf.InstanceLocation)
		f.schemaDiagnostic(leaf, ps)
	}
}

// schemaErrorUnder reports whether the pipeline schema rejected anything at
// or below the JSON pointer ptr.
func (f *file) schemaErrorUnder(ptr string) bool {
	for _, e := range f.schemaErrs {
		if e == ptr || strings.HasPrefix(e, ptr+"/") {
			return true
		}
	}
	return false
}

var (
	quotedRE   = regexp.MustCompile(`'([^']*)'`)
	durationKW = "/$defs/duration"
	exprKW     = "/$defs/expr/type"
)

func lastSegment(p string) string {
	return p[strings.LastIndex(p, "/")+1:]
}

func (f *file) schemaDiagnostic(ve *jsonschema.ValidationError, ps *pointers) {
	ptr := ve.InstanceLocation
	where := f.describePointer(ptr, ps)
	at := ps.value[ptr]
	if at == nil {
		at = f.root
	}
	kw := lastSegment(ve.KeywordLocation)
	msg := ve.Message
	switch kw {
	case "additionalProperties", "unevaluatedProperties":
		allowed := f.allowedProperties(ve)
		for _, m := range quotedRE.FindAllStringSubmatch(ve.Message, -1) {
			name := m[1]
			keyNode := ps.key[ptr+"/"+escapePointer(name)]
			p := f.pos(at)
			if keyNode != nil {
				p = f.pos(keyNode)
			}
			f.l.errorf(p, "%sunknown field %q%s", where, name, Suggest(name, allowed))
		}
		return
	case "required":
		if k := ps.key[ptr]; k != nil {
			at = k
		}
		var names []string
		for _, m := range quotedRE.FindAllStringSubmatch(ve.Message, -1) {
			names = append(names, strconv.Quote(m[1]))
		}
		if len(names) == 1 {
			msg = "missing required field " + names[0]
		} else {
			msg = "missing required fields " + strings.Join(names, ", ")
		}
		if len(names) == 1 && names[0] == `"max_iterations"` {
			msg += ": every loop needs a bound"
		}
	case "pattern":
		m := quotedRE.FindStringSubmatch(ve.Message)
		switch {
		case strings.Contains(ve.AbsoluteKeywordLocation, durationKW) || strings.Contains(ve.KeywordLocation, durationKW):
			msg = fmt.Sprintf("%s is not a duration: write it like 30s, 5m or 1h30m", quoteValue(at))
		case m != nil && patternRules[m[1]] != "":
			msg = fmt.Sprintf("%s is not allowed: %s", quoteValue(at), patternRules[m[1]])
		default:
			msg = fmt.Sprintf("%s %s", quoteValue(at), ve.Message)
		}
	case "const":
		// The validator prints the constant as Go syntax ("1" for 1), so
		// take it from the schema document.
		want, _ := json.Marshal(schemaValue(ve.AbsoluteKeywordLocation))
		msg = fmt.Sprintf("%s is not allowed: it must be %s", shownValue(at), want)
	case "type":
		if strings.HasPrefix(msg, "expected boolean") && yaml11Bools[strings.ToLower(at.Value)] {
			msg += fmt.Sprintf(": write true or false (YAML 1.2 reads %s as a string)", at.Value)
		}
		if (strings.Contains(ve.AbsoluteKeywordLocation, durationKW) || strings.Contains(ve.KeywordLocation, durationKW)) &&
			at.Kind == yaml.ScalarNode && (at.ShortTag() == "!!int" || at.ShortTag() == "!!float") {
			msg = fmt.Sprintf("%s is a number, and a duration needs a unit: write %ss (or 500ms, 2m, 1h)", at.Value, at.Value)
		}
		if strings.HasSuffix(ve.AbsoluteKeywordLocation, exprKW) && at.Kind != yaml.ScalarNode {
			msg = fmt.Sprintf("an expression field takes an expression or a number, boolean or null, not a YAML list or mapping: write it as one expression, e.g. '[1, 2]' or '{\"k\": 1}'")
		}
	case "not":
		// A "not" in the schema carries its message as its description,
		// and points at the last of the fields it forbids together.
		sub, _ := schemaValue(ve.AbsoluteKeywordLocation).(map[string]any)
		if d, ok := sub["description"].(string); ok {
			msg = d
		}
		req, _ := sub["required"].([]any)
		for i := len(req) - 1; i >= 0; i-- {
			name, _ := req[i].(string)
			if k := ps.key[ptr+"/"+escapePointer(name)]; k != nil {
				at = k
				break
			}
		}
	case "maximum":
		if most, ok := schemaValue(ve.AbsoluteKeywordLocation).(float64); ok {
			msg = fmt.Sprintf("%s is more than %s, the most it can be", at.Value, strconv.FormatFloat(most, 'f', -1, 64))
		}
	case "enum":
		var allowed []string
		enum, _ := schemaValue(ve.AbsoluteKeywordLocation).([]any)
		for _, v := range enum {
			if s, ok := v.(string); ok {
				allowed = append(allowed, s)
			}
		}
		msg = fmt.Sprintf("%s is not allowed: %s%s", quoteValue(at), ve.Message, Suggest(at.Value, allowed))
	}
	f.l.errorf(f.pos(at), "%s%s", where, msg)
}

// patternRules says in words what the schema's name patterns allow.
var patternRules = map[string]string{
	`^[A-Za-z_][A-Za-z0-9_]*$`: "use letters, digits and _, not starting with a digit",
	`^[A-Za-z0-9_.-]+$`:        "use letters, digits, _, . and -",
}

// yaml11Bools are the YAML 1.1 spellings of booleans, which YAML 1.2 (and
// so flowrun) reads as strings.
var yaml11Bools = map[string]bool{"yes": true, "no": true, "on": true, "off": true, "y": true, "n": true}

// shownValue writes a scalar as it reads in the file: strings quoted,
// numbers and booleans bare.
func shownValue(n *yaml.Node) string {
	if n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() != "!!str" {
		return n.Value
	}
	return quoteValue(n)
}

func quoteValue(n *yaml.Node) string {
	if n == nil {
		return "value"
	}
	return strconv.Quote(n.Value)
}

// describePointer names the field a JSON pointer refers to, relative to the
// innermost node that holds it: `node "refine": loop.max_iterations: `.
func (f *file) describePointer(ptr string, ps *pointers) string {
	segs := jsonvalue.SplitPointer(ptr)
	nodeEnd := -1
	for i := 0; i+1 < len(segs); i++ {
		_, isIndex := atoi(segs[i+1])
		if (segs[i] == "nodes" || segs[i] == "body") && isIndex {
			nodeEnd = i + 2
		}
		if segs[i] == "branches" && i+2 < len(segs) {
			if _, ok := atoi(segs[i+2]); ok {
				nodeEnd = i + 3
			}
		}
	}
	var b strings.Builder
	rest := segs
	if nodeEnd > 0 {
		nodePtr := "/" + strings.Join(escapeAll(segs[:nodeEnd]), "/")
		if _, id := get(ps.value[nodePtr], "id"); id != nil && id.Value != "" {
			fmt.Fprintf(&b, "node %q: ", id.Value)
		} else {
			fmt.Fprintf(&b, "%s: ", jsonvalue.FieldPath(segs[:nodeEnd]))
		}
		rest = segs[nodeEnd:]
	}
	if len(rest) > 0 {
		b.WriteString(jsonvalue.FieldPath(rest))
		b.WriteString(": ")
	}
	return b.String()
}

func escapeAll(segs []string) []string {
	out := make([]string, len(segs))
	for i, s := range segs {
		out[i] = escapePointer(s)
	}
	return out
}

func atoi(s string) (int, bool) {
	i, err := strconv.Atoi(s)
	return i, err == nil
}

// schemaValue returns the part of the pipeline schema document that an
// absolute keyword location points at, or nil.
func schemaValue(loc string) any {
	_, doc := pipelineSchema()
	if i := strings.Index(loc, "#"); i >= 0 {
		loc = loc[i+1:]
	}
	var cur any = doc
	for _, s := range jsonvalue.SplitPointer(loc) {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[s]
		case []any:
			i, _ := strconv.Atoi(s)
			if i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

// allowedProperties lists the property names the failing schema object
// declares, for "did you mean" suggestions.
func (f *file) allowedProperties(ve *jsonschema.ValidationError) []string {
	loc := ve.AbsoluteKeywordLocation
	loc = loc[:max(0, strings.LastIndex(loc, "/"))] // the object holding the keyword
	obj, _ := schemaValue(loc).(map[string]any)
	props, _ := obj["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
