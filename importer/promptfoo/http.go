package promptfoo

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// endpoint is promptfoo's http provider, an application behind an HTTP
// endpoint, as a flowrun http tool the pipelines call with the prompt
// and the vars its request reads.
type endpoint struct {
	tool        toolDoc
	vars        []string // the test vars the request reads, besides the prompt
	sendsPrompt bool     // the request reads {{prompt}}
	output      string   // the pipelines' text, from the response
}

// endpointTool is the tool's name in the pipelines.
const endpointTool = "endpoint"

type toolDoc struct {
	Description string         `yaml:"description"`
	Parameters  map[string]any `yaml:"parameters"`
	HTTP        httpDoc        `yaml:"http"`
}

type httpDoc struct {
	URL     string            `yaml:"url"`
	Method  string            `yaml:"method"`
	Headers map[string]string `yaml:"headers,omitempty"`
	Body    any               `yaml:"body,omitempty"`
	Timeout string            `yaml:"timeout,omitempty"`
}

type toolCallDoc struct {
	Name string         `yaml:"name"`
	Args map[string]any `yaml:"args,omitempty"`
}

func isEndpoint(id string) bool {
	return id == "http" || id == "https" || strings.HasPrefix(id, "http://") || strings.HasPrefix(id, "https://")
}

// endpoint converts an http provider: url (or the id, when it is one),
// method, headers and body rendered as promptfoo renders them (each
// string a Nunjucks template of the test's vars and prompt, a body of
// JSON text parsed first, as promptfoo parses it), and
// transformResponse (or its old name responseParser) when it is json,
// text or a path into json. nil, with the reason listed, when it cannot
// be converted.
func (c *converter) endpoint(id, cfg *yaml.Node) *endpoint {
	e := &endpoint{}
	h := httpDoc{Method: "GET"} // promptfoo's default
	if id.Value != "http" && id.Value != "https" {
		h.URL = id.Value
	}
	var bodyNode *yaml.Node
	output, outputNode := "json", id
	failed := false
	translate := func(n *yaml.Node, s, what string) string {
		var read []string
		out, err := translateOutputs(s, &read)
		if err == nil && templateRE.MatchString(outputRE.ReplaceAllString(s, "")) {
			err = fmt.Errorf("a Nunjucks tag or comment ({%% %%}, {# #}) is not translated")
		}
		if err != nil {
			c.problem(n, "provider %s: %s: not converted: %v", id.Value, what, err)
			failed = true
			return s
		}
		for _, v := range read {
			if v == "prompt" {
				e.sendsPrompt = true
			} else if !slices.Contains(e.vars, v) {
				e.vars = append(e.vars, v)
			}
		}
		return out
	}
	for i := 0; cfg != nil && i+1 < len(cfg.Content); i += 2 {
		k, v := cfg.Content[i], cfg.Content[i+1]
		switch k.Value {
		case "url":
			h.URL = v.Value
		case "method":
			h.Method = strings.ToUpper(v.Value)
		case "headers":
			h.Headers = map[string]string{}
			for j := 0; j+1 < len(v.Content); j += 2 {
				h.Headers[v.Content[j].Value] = translate(v.Content[j+1], v.Content[j+1].Value, "header "+v.Content[j].Value)
			}
		case "body":
			bodyNode = v
		case "timeout": // in milliseconds
			if ms, err := strconv.Atoi(v.Value); err != nil || ms <= 0 {
				c.problem(v, "provider %s: timeout %s: not converted (a number of milliseconds is)", id.Value, v.Value)
			} else {
				h.Timeout = strconv.Itoa(ms) + "ms"
			}
		case "transformResponse", "responseParser":
			output, outputNode = strings.TrimSpace(v.Value), v
		default:
			c.problem(k, "provider %s: config %s: not converted", id.Value, k.Value)
		}
	}
	if strings.Contains(h.URL, "{{") || strings.Contains(h.URL, "${{") {
		c.problem(id, "provider %s: not converted: its url comes from vars or the environment; write it out", id.Value)
		return nil
	}
	if why := fixedURL(h.URL); why != "" {
		c.problem(id, "provider %s: not converted: %s", id.Value, why)
		return nil
	}
	if !slices.Contains([]string{"GET", "POST", "PUT", "PATCH", "DELETE"}, h.Method) {
		c.problem(id, "provider %s: method %s: not converted (GET, POST, PUT, PATCH and DELETE are)", id.Value, h.Method)
		return nil
	}
	if bodyNode != nil {
		if h.Method == "GET" {
			c.problem(id, "provider %s: not converted: it has a body and the method GET (promptfoo's default); write method: POST", id.Value)
			return nil
		}
		h.Body = c.requestBody(bodyNode, translate)
	}
	if failed {
		c.problem(id, "provider %s: not converted, as a part of its request is not (listed with it)", id.Value)
		return nil
	}
	e.output = c.responseText(id.Value, outputNode, output)
	props := map[string]any{}
	if e.sendsPrompt {
		props["prompt"] = map[string]any{"type": "string"}
	}
	sort.Strings(e.vars)
	for _, v := range e.vars {
		props[v] = map[string]any{}
	}
	e.tool = toolDoc{Description: "The application's HTTP endpoint, promptfoo's provider " + id.Value + ".",
		Parameters: map[string]any{"type": "object", "properties": props}, HTTP: h}
	return e
}

// fixedURL says why a URL cannot be an http tool's; "" when it can.
func fixedURL(s string) string {
	switch {
	case s == "":
		return "it has no url"
	case !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://"):
		return fmt.Sprintf("the url %q does not start with http:// or https://", s)
	}
	return ""
}

// requestBody is the body as the tool sends it: a mapping or list with
// each string a template, or text; JSON text is parsed first, as
// promptfoo parses it (each var's text is then escaped in the JSON sent).
func (c *converter) requestBody(n *yaml.Node, translate func(*yaml.Node, string, string) string) any {
	var v any
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		if json.Unmarshal([]byte(n.Value), &v) != nil {
			return translate(n, n.Value, "body")
		}
	} else if err := n.Decode(&v); err != nil {
		return translate(n, n.Value, "body")
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			return translate(n, x, "body")
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	return walk(v)
}

var jsonPath = regexp.MustCompile(`^json((?:\.[A-Za-z_$][A-Za-z0-9_$]*)*)$`)

// responseText is the pipelines' text from the tool's response, as
// promptfoo's transformResponse gives the output: json (also none) is
// the parsed body, text the body, json.a.b a field; a value that is not
// text is its JSON, as promptfoo's asserts see it.
func (c *converter) responseText(id string, n *yaml.Node, transform string) string {
	const body = "nodes.answer.body"
	if transform == "text" {
		return body
	}
	m := jsonPath.FindStringSubmatch(transform)
	if m == nil {
		c.problem(n, "provider %s: transformResponse %s: not converted (json, text and json.FIELD.FIELD are); the output is the response's body", id, strconv.Quote(transform))
		return body
	}
	if m[1] == "" {
		return `json_valid(` + body + `) ? (let v = fromJSON(` + body + `); type(v) == "string" ? v : json(v)) : ` + body
	}
	path := strings.ReplaceAll(m[1], ".", "?.")
	return `let v = fromJSON(` + body + `)` + path + `; v == nil ? "" : type(v) == "string" ? v : json(v)`
}

// reads are the vars a pipeline that calls the endpoint with p reads:
// the prompt's, when the request sends it, and the request's own.
func (e *endpoint) reads(p prompt) []string {
	var out []string
	if e.sendsPrompt {
		out = append(out, p.vars...)
	}
	for _, v := range e.vars {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// call is the node that sends the prompt (p's text) and the vars to the
// endpoint, each var as text, as promptfoo renders it into the request.
func (e *endpoint) call(p prompt, inputs map[string]inputDoc) *toolCallDoc {
	args := map[string]any{}
	if e.sendsPrompt {
		args["prompt"] = textValue(p.text)
	}
	for _, v := range e.vars {
		switch inputs[v].Type {
		case "string":
			args[v] = "inputs." + v
		case "object", "array":
			args[v] = "json(inputs." + v + ")"
		default:
			args[v] = "string(inputs." + v + ")"
		}
	}
	return &toolCallDoc{Name: endpointTool, Args: args}
}

// structured are the vars the request reads that are lists or mappings;
// none without an endpoint.
func (e *endpoint) structured(inputs map[string]inputDoc) []string {
	if e == nil {
		return nil
	}
	var out []string
	for _, v := range e.vars {
		if t := inputs[v].Type; t == "object" || t == "array" {
			out = append(out, v)
		}
	}
	return out
}

// textValue is text as a flowrun value, where a string is an expression:
// text with ${{ }} is a template, and plain text a string literal.
func textValue(s string) string {
	if strings.Contains(s, "${{") {
		return s
	}
	b, _ := json.Marshal(s)
	return "${{ " + string(b) + " }}"
}
