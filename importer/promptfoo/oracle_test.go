package promptfoo

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// oracleConfig is what the corpus's oracle.json expects of one
// configuration: each part of it (a unit), where it is written and what
// its conversion must give. A unit without a check cannot be converted
// and must be listed.
type oracleConfig struct {
	Dir   string       `json:"dir"`
	Units []oracleUnit `json:"units"`
}

type oracleUnit struct {
	ID      string                     `json:"id"`
	Kind    string                     `json:"kind"`
	What    string                     `json:"what"`
	Ranges  [][4]int                   `json:"ranges"`
	Parents []string                   `json:"parents"`
	Check   map[string]json.RawMessage `json:"check"`
	// ExpectVars are the test's vars: {value: V}, or another shape
	// ({list: [...]}) for a var that is not one value.
	ExpectVars map[string]map[string]any `json:"expect_vars"`
}

func readOracle(t *testing.T, dir string) map[string]oracleConfig {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "oracle.json"))
	if err != nil {
		return nil
	}
	var list []oracleConfig
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatalf("oracle.json: %v", err)
	}
	out := map[string]oracleConfig{}
	for _, c := range list {
		out[c.Dir] = c
	}
	return out
}

// converted is what a conversion gave, read back for the oracle's checks.
type converted struct {
	res       *Result
	config    string
	items     []map[string]any
	pipelines []pipelineDoc
}

func readBack(res *Result, config string, items []map[string]any) converted {
	c := converted{res: res, config: config, items: items}
	for _, name := range res.Pipelines {
		var p pipelineDoc
		if yaml.Unmarshal(res.Files[name], &p) == nil {
			c.pipelines = append(c.pipelines, p)
		}
	}
	return c
}

// silent are the units the conversion changed without listing them: their
// check fails and no problem is listed where they, or a part they belong
// to, are written.
func silent(o oracleConfig, c converted) []string {
	byID := map[string]oracleUnit{}
	for _, u := range o.Units {
		byID[u.ID] = u
	}
	tests := matchTests(o, c.items)
	checked := map[string]bool{} // the blocks of tests whose tests are checked one by one
	for _, u := range o.Units {
		if u.Kind == "test" && u.Check != nil {
			for _, p := range u.Parents {
				checked[p] = true
			}
		}
	}
	var out []string
	for _, u := range o.Units {
		if _, ok := beyondOracle[o.Dir+": "+u.What]; ok {
			continue
		}
		if checked[u.ID] || holds(u, c, tests) || kept(u, byID, c, tests) || endpointKept(u, c) || listed(u, byID, c) {
			continue
		}
		out = append(out, fmt.Sprintf("%s (%v)", u.What, u.Ranges))
	}
	return out
}

// beyondOracle are the parts the oracle expects to be listed that the
// importer converts, and why that keeps promptfoo's meaning.
var beyondOracle = map[string]string{
	"54-promptfoo-promptfoo: prompt file://prompts.txt":             "its {{ (style_config | load).tone }} uses promptfoo's built-in load filter (JSON.parse), translated as fromJSON",
	"16-Cody2504-Promptfoo-Learning: prompt file://chatprompt.json": "its user message's text and image_url parts become the node's prompt and images:, sent in that order, the image a data URL of the file:// var's bytes in base64 as promptfoo loads an image var (TestImportPromptfooImageParts)",
}

// keyRE is an assert's or a test's key that the oracle expects listed
// and the importer keeps for the checks' verdict (weights, thresholds);
// the oracle also expects promptfoo's echo provider listed, which is
// flowrun's echo model.
var keyRE = regexp.MustCompile(`^(?:assert (\S+)|test|defaultTest) (weight|threshold)$`)

// kept says whether a weight or threshold the oracle expects listed is
// in the dataset, where the checks honour it as promptfoo does: on an
// assert of its type in its test's item (any item, for a test the oracle
// does not match), or on every item for defaultTest's.
func kept(u oracleUnit, byID map[string]oracleUnit, c converted, tests map[string]map[string]any) bool {
	if u.What == "provider echo" {
		return slices.ContainsFunc(c.pipelines, func(p pipelineDoc) bool { return p.Models["default"].Provider == "echo" })
	}
	m := keyRE.FindStringSubmatch(u.What)
	if m == nil {
		return false
	}
	if m[1] == "" {
		for _, it := range c.items {
			if it[m[2]] == nil {
				return false
			}
		}
		return len(c.items) > 0
	}
	candidates := c.items
	for _, p := range u.Parents {
		if it := tests[p]; it != nil && byID[p].Kind == "test" {
			candidates = []map[string]any{it}
		}
	}
	for _, it := range candidates {
		asserts, _ := it["asserts"].([]any)
		for _, a := range asserts {
			if a := a.(map[string]any); a["type"] == m[1] && a[m[2]] != nil && a["not_converted"] == nil {
				return true
			}
		}
	}
	return false
}

// matchTests pairs each test unit with the first item, in order, not yet
// taken whose fields hold the test's vars.
func matchTests(o oracleConfig, items []map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	taken := make([]bool, len(items))
	for _, u := range o.Units {
		if u.Kind != "test" || u.Check == nil {
			continue
		}
		for i, it := range items {
			if taken[i] {
				continue
			}
			ok := true
			for name, v := range u.ExpectVars {
				want, one := v["value"]
				if !one {
					continue
				}
				if got, has := it[name]; !has || !sameValue(got, want) {
					ok = false
					break
				}
			}
			if ok {
				taken[i], out[u.ID] = true, it
				break
			}
		}
	}
	return out
}

func filled(s string, item map[string]any) string {
	return varRE.ReplaceAllStringFunc(s, func(m string) string {
		if x, ok := item[varRE.FindStringSubmatch(m)[1]]; ok {
			return text(x)
		}
		return m
	})
}

func sameValue(got, want any) bool {
	return reflect.DeepEqual(got, want) || text(got) == text(want)
}

func holds(u oracleUnit, c converted, tests map[string]map[string]any) bool {
	if u.Check == nil {
		return false
	}
	field := func(k string) any {
		var v any
		_ = json.Unmarshal(u.Check[k], &v)
		return v
	}
	switch {
	case u.Check["always"] != nil:
		return true
	case u.Check["match"] != nil:
		return tests[u.ID] != nil
	case u.Kind == "var":
		it := tests[field("test").(string)]
		v, ok := it[field("var").(string)]
		return ok && sameValue(v, field("value"))
	case u.Kind == "assert" || u.Kind == "assert-key":
		it := tests[field("test").(string)]
		asserts, _ := it["asserts"].([]any)
		for _, a := range asserts {
			a := a.(map[string]any)
			if a["type"] != field("type") {
				continue
			}
			// promptfoo fills an assert's {{var}} from the test's vars, as
			// the importer does.
			want := field("value")
			if s, ok := want.(string); ok {
				want = filled(s, it)
			}
			if th := field("threshold"); th != nil && sameValue(a["threshold"], th) || u.Check["value"] != nil && sameValue(a["value"], want) {
				return true
			}
		}
		return false
	case u.Kind == "prompt":
		var want [][]struct{ Role, Content string }
		_ = json.Unmarshal(u.Check["messages"], &want)
		for _, msgs := range want {
			if !c.hasPrompt(msgs) {
				return false
			}
		}
		return len(want) > 0
	case u.Check["pipeline_text"] != nil:
		for _, name := range c.res.Pipelines {
			if strings.Contains(string(c.res.Files[name]), field("pipeline_text").(string)) {
				return true
			}
		}
		return false
	case u.Check["request"] != nil:
		var req map[string]any
		_ = json.Unmarshal(u.Check["request"], &req)
		for _, p := range c.pipelines {
			m := p.Models["default"]
			if m.Model != field("model") {
				continue
			}
			for k, v := range req {
				switch {
				case k == "temperature" && m.Temperature != nil && sameValue(*m.Temperature, v):
				case k == "max_tokens" && sameValue(m.MaxTokens, v):
				default:
					return false
				}
			}
			return true
		}
		return false
	case u.Check["model"] != nil:
		for _, m := range c.res.Models {
			if m == field("model") {
				return true
			}
		}
		return false
	}
	return false
}

// hasPrompt says whether a pipeline sends these messages: the system ones
// as its system, the user one as its prompt.
func (c converted) hasPrompt(msgs []struct{ Role, Content string }) bool {
	var system, user []string
	for _, m := range msgs {
		// The template's {{ }} as the importer translates them (its
		// unit tests check the translation): the text around them must
		// be promptfoo's.
		s := outputRE.ReplaceAllStringFunc(m.Content, func(v string) string {
			e, _, _ := nunjucksExpr(outputRE.FindStringSubmatch(v)[1])
			return "${{ " + e + " }}"
		})
		if m.Role == "system" {
			system = append(system, s)
		} else {
			user = append(user, s)
		}
	}
	for _, p := range c.pipelines {
		n := p.Nodes[0]
		if n.Tool != nil {
			// An endpoint is sent the prompt's text, as promptfoo sends it.
			if len(system) == 0 && n.Tool.Args["prompt"] == textValue(strings.Join(user, "\n\n")) {
				return true
			}
			continue
		}
		if strings.TrimSpace(n.LLM.System) == strings.TrimSpace(strings.Join(system, "\n\n")) && strings.TrimSpace(n.LLM.Prompt) == strings.TrimSpace(strings.Join(user, "\n\n")) {
			return true
		}
	}
	return false
}

// endpointKept says whether an http provider, or a key of its config,
// that the oracle expects listed is in every pipeline's endpoint tool
// with promptfoo's meaning: its url, its method (GET unless given), each
// header and the body with {{ }} translated (a body of JSON text parsed,
// as promptfoo parses it), transformResponse (or responseParser) as a
// path into the response, the timeout in milliseconds.
func endpointKept(u oracleUnit, c converted) bool {
	rest, ok := strings.CutPrefix(u.What, "provider ")
	if !ok || len(c.pipelines) == 0 {
		return false
	}
	id, key, _ := strings.Cut(rest, " config ")
	if !isEndpoint(id) {
		return false
	}
	cfg, ok := endpointConfig(c.config, id)
	if !ok {
		return false
	}
	for _, p := range c.pipelines {
		t, ok := p.Tools[endpointTool]
		if !ok || p.Nodes[0].Tool == nil || p.Nodes[0].Tool.Name != endpointTool {
			return false
		}
		h := t.HTTP
		want := func(k string) any { return cfg[k] }
		switch key {
		case "":
			url, _ := cfg["url"].(string)
			if url == "" {
				url = id
			}
			if h.URL != url {
				return false
			}
		case "url":
			if h.URL != want("url") {
				return false
			}
		case "method":
			if m, _ := want("method").(string); h.Method != strings.ToUpper(m) {
				return false
			}
		case "headers":
			hs, _ := want("headers").(map[string]any)
			if len(hs) != len(h.Headers) {
				return false
			}
			for k, v := range hs {
				if tr, err := translateOutputs(fmt.Sprint(v), new([]string)); err != nil || h.Headers[k] != tr {
					return false
				}
			}
		case "body":
			b := want("body")
			if text, ok := b.(string); ok {
				var v any
				if json.Unmarshal([]byte(text), &v) == nil {
					b = v
				}
			}
			if !sameJSON(translatedBody(b), h.Body) {
				return false
			}
		case "transformResponse", "responseParser":
			path, _ := want(key).(string)
			got := p.Outputs["text"]
			field, isField := strings.CutPrefix(strings.TrimSpace(path), "json.")
			switch {
			case strings.TrimSpace(path) == "json":
				if !strings.Contains(got, "fromJSON(nodes.answer.body); type(v)") {
					return false
				}
			case isField:
				if !strings.Contains(got, "fromJSON(nodes.answer.body)?."+strings.ReplaceAll(field, ".", "?.")+";") {
					return false
				}
			default:
				return false
			}
		case "timeout":
			if h.Timeout != fmt.Sprint(want("timeout"))+"ms" {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// endpointConfig is the config of the provider id in a configuration.
func endpointConfig(config, id string) (map[string]any, bool) {
	b, err := os.ReadFile(config)
	if err != nil {
		return nil, false
	}
	var doc map[string]any
	if yaml.Unmarshal(b, &doc) != nil {
		return nil, false
	}
	for _, key := range []string{"providers", "targets"} {
		list, _ := doc[key].([]any)
		for _, it := range list {
			m, _ := it.(map[string]any)
			if m["id"] == id {
				cfg, _ := m["config"].(map[string]any)
				return cfg, true
			}
		}
	}
	return nil, false
}

// translatedBody is a body with each string's {{ }} translated.
func translatedBody(v any) any {
	switch x := v.(type) {
	case string:
		tr, err := translateOutputs(x, new([]string))
		if err != nil {
			return nil
		}
		return tr
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = translatedBody(e)
		}
		return out
	case []any:
		out := []any{}
		for _, e := range x {
			out = append(out, translatedBody(e))
		}
		return out
	}
	return v
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// listed says whether a problem is listed where the unit, or a part it
// belongs to, is written; a unit written in another file than the
// configuration (no ranges) is listed by a problem in such a file.
func listed(u oracleUnit, byID map[string]oracleUnit, c converted) bool {
	for _, p := range c.res.Problems {
		if p.File != c.config && len(u.Ranges) == 0 {
			return true
		}
		if p.File != c.config {
			continue
		}
		for _, r := range allRanges(u, byID) {
			if within(p, r) {
				return true
			}
		}
	}
	return false
}

func allRanges(u oracleUnit, byID map[string]oracleUnit) [][4]int {
	out := append([][4]int(nil), u.Ranges...)
	for _, id := range u.Parents {
		out = append(out, byID[id].Ranges...)
	}
	return out
}

func within(p Problem, r [4]int) bool {
	after := p.Line > r[0] || p.Line == r[0] && p.Col >= r[1]
	before := p.Line < r[2] || p.Line == r[2] && p.Col <= r[3]
	return after && before
}
