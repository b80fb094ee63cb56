package dsl

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// HTTPTool implements a declared tool with one HTTP request to a service
// the pipeline names: an application's endpoint that a batch evaluates,
// as promptfoo's http provider does. Its templates see the call's
// arguments as inputs.<parameter>, as an llm tool's do. The URL's scheme
// and host are written in the pipeline, never computed, so no argument
// (a model's, in an agent) can send the request elsewhere.
type HTTPTool struct {
	Method   string
	URL      *Template
	Origin   string // the URL's scheme://host[:port], as written
	Headers  []HTTPHeader
	Body     *Value // nil: none; text is sent as it is, anything else as JSON
	Timeout  time.Duration
	MaxBytes int
}

// HTTPHeader is one request header, its value a template.
type HTTPHeader struct {
	Name  string
	Value *Template
}

func (f *file) httpTool(label string, n *yaml.Node, sc scope) *HTTPTool {
	h := &HTTPTool{Method: "POST", Timeout: 30 * time.Second, MaxBytes: defaultHTTPMaxBytes}
	if m, ok := str(valueOf(n, "method")); ok {
		h.Method = strings.ToUpper(m) // the schema allows only httpMethods
	}
	if un := valueOf(n, "url"); un != nil {
		h.URL = f.template(un, sc)
		s, _ := str(un)
		if why := fixedHost(s); why != "" {
			f.l.errorf(f.pos(un), "%s: url %s; write the scheme and host in the url (http://host:port/...), and ${{ }} only after them", label, why)
		} else if u, err := url.Parse(strings.SplitN(s, "${{", 2)[0]); err == nil {
			h.Origin = u.Scheme + "://" + u.Host
		}
	}
	for _, kv := range pairs(valueOf(n, "headers")) {
		h.Headers = append(h.Headers, HTTPHeader{Name: kv[0].Value, Value: f.template(kv[1], sc)})
	}
	if b := valueOf(n, "body"); b != nil {
		h.Body = f.bodyValue(b, sc)
		if h.Method == "GET" {
			f.l.errorf(f.pos(b), "%s: a GET request has no body; use method: POST or remove body:", label)
		}
	}
	if d := f.duration(valueOf(n, "timeout")); d > 0 {
		h.Timeout = d
	}
	if b, ok := intValue(valueOf(n, "max_bytes")); ok {
		h.MaxBytes = b
	}
	return h
}

// fixedHost says why a URL's scheme and host are not written before its
// first ${{ }}; "" when they are.
func fixedHost(s string) string {
	head, _, templated := strings.Cut(s, "${{")
	u, err := url.Parse(head)
	switch {
	case err != nil && !templated:
		return fmt.Sprintf("%q is not a URL: %v", s, err)
	case u == nil || u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("%q does not start with http:// or https://", s)
	case u.Host == "" && templated:
		return fmt.Sprintf("%q computes its host", s)
	case u.Host == "":
		return fmt.Sprintf("%q names no host", s)
	case templated && !strings.Contains(strings.TrimPrefix(head, u.Scheme+"://"), "/"):
		return fmt.Sprintf("%q computes its host", s)
	}
	return ""
}

// bodyValue compiles a request body: mappings and lists hold values, and
// a string is a template ("${{ expr }}" alone keeps the expression's
// type), since a body is mostly text to send.
func (f *file) bodyValue(n *yaml.Node, sc scope) *Value {
	if n == nil {
		return &Value{}
	}
	switch n.Kind {
	case yaml.MappingNode:
		v := &Value{obj: []*Field{}, pos: f.pos(n)}
		for _, kv := range pairs(n) {
			v.obj = append(v.obj, &Field{Name: kv[0].Value, Value: f.bodyValue(kv[1], sc)})
		}
		return v
	case yaml.SequenceNode:
		v := &Value{list: []*Value{}, pos: f.pos(n)}
		for _, c := range items(n) {
			v.list = append(v.list, f.bodyValue(c, sc))
		}
		return v
	}
	if _, ok := str(n); ok {
		v := f.text(n, sc)
		v.pos = f.pos(n)
		return v
	}
	return &Value{lit: Plain(n), pos: f.pos(n)}
}

// httpResult is what an HTTP request gives: http_get's and an http tool's.
var httpResult = Object(map[string]*Type{"status": IntType, "body": StringType, "truncated": BoolType})
