package nodes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/redact"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/sandbox"
)

// tool is a tool as an agent offers it to the model and runs it. A finish
// tool has no run: the model's call to it is the agent's answer.
type tool struct {
	spec       llm.ToolSpec
	name       string // as the pipeline names it, when not spec.Name (MCP tools)
	finish     bool
	needsModel bool // an llm tool
	run        func(ctx context.Context, s *runtime.Scope, at callSite, args map[string]any) (any, error)
}

// callSite addresses one tool call: a pipeline tool's nodes run under
// dir+name ("solve[3]/ocr/read"), an llm tool's model call is the node
// name under dir ("solve[3]/summarize"). dir names the agent and its step;
// name is the tool's, with "[k]" when the turn calls it more than once.
type callSite struct{ dir, name string }

// checkTool says, before a run starts, why a built-in tool cannot run
// here: the code tools need the sandbox and its language.
func (svc *Services) checkTool(name string) error {
	if name != "python_execute" && name != "code_execute" {
		return nil
	}
	if svc.Sandbox == nil {
		return fmt.Errorf("tool %s runs code in the sandbox, which is not available here", name)
	}
	if err := svc.Sandbox.Check(sandbox.Python); err != nil {
		return fmt.Errorf("tool %s: %w", name, err)
	}
	return nil
}

// noParameters is what a tool declared without parameters is offered with:
// OpenAI function tools need an object schema.
var noParameters = map[string]any{"type": "object", "properties": map[string]any{}}

// agentTools resolves the agent's tools and finish tools, declared in p or
// built in, in the order the agent lists them (a name listed twice is
// offered once).
func (svc *Services) agentTools(ctx context.Context, p *dsl.Pipeline, a *dsl.Agent) ([]*tool, error) {
	var out []*tool
	seen := map[string]*tool{}
	add := func(name string, finish bool) error {
		if t := seen[name]; t != nil {
			t.finish = t.finish || finish
			return nil
		}
		if s, tool, ok := p.MCPToolName(name); ok {
			ts, err := svc.mcpTools(ctx, s, tool)
			if err != nil {
				return err
			}
			for _, t := range ts {
				if seen[t.spec.Name] == nil {
					seen[t.spec.Name] = t
					out = append(out, t)
				}
			}
			return nil
		}
		t, err := svc.lookupTool(ctx, p, name)
		if err != nil {
			return err
		}
		if t.run == nil && !finish {
			return runtime.Errorf(errclass.Critical, "tool %q has no implementation, so it can only be a finish tool", name)
		}
		t.finish = finish
		seen[name] = t
		out = append(out, t)
		return nil
	}
	for _, name := range a.Tools {
		if err := add(name, false); err != nil {
			return nil, err
		}
	}
	for _, name := range a.Finish {
		if err := add(name, true); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (svc *Services) lookupTool(ctx context.Context, p *dsl.Pipeline, name string) (*tool, error) {
	if s, tool, ok := p.MCPToolName(name); ok {
		ts, err := svc.mcpTools(ctx, s, tool)
		if err != nil {
			return nil, err
		}
		return ts[0], nil
	}
	if err := svc.checkTool(name); err != nil {
		return nil, runtime.Errorf(errclass.SandboxUnavailable, "%w", err)
	}
	if d, ok := p.Tools[name]; ok {
		t := &tool{spec: llm.ToolSpec{Name: name, Description: d.Description, Parameters: d.Parameters}}
		if t.spec.Parameters == nil {
			t.spec.Parameters = noParameters
		}
		switch {
		case d.Pipeline != nil:
			t.run = func(ctx context.Context, s *runtime.Scope, at callSite, args map[string]any) (any, error) {
				return s.RunTool(ctx, d.Pipeline, args, at.dir+at.name+"/")
			}
		case d.LLM != nil:
			t.needsModel = true
			t.run = func(ctx context.Context, s *runtime.Scope, at callSite, args map[string]any) (any, error) {
				return svc.runLLMTool(ctx, s, d, at, args)
			}
		case d.HTTP != nil:
			t.run = httpTool(d)
		}
		return t, nil
	}
	switch name {
	case "python_execute":
		return &tool{spec: pythonExecuteSpec, run: svc.codeTool(sandbox.Python)}, nil
	case "code_execute":
		return &tool{spec: codeExecuteSpec, run: svc.codeTool("")}, nil
	case "read_file":
		return &tool{spec: readFileSpec, run: readFile}, nil
	case "http_get":
		if p.HTTPGet == nil {
			return nil, runtime.Errorf(errclass.Critical, "tool http_get is off in %s: enable it with a top-level http_get:", p.Path)
		}
		cfg := p.HTTPGet
		return &tool{spec: httpGetSpec, run: func(ctx context.Context, _ *runtime.Scope, _ callSite, args map[string]any) (any, error) {
			raw, _ := args["url"].(string)
			return httpGet(ctx, cfg, raw)
		}}, nil
	}
	return nil, runtime.Errorf(errclass.Critical, "unknown tool %q", name)
}

// runLLMTool makes an llm tool's one model call, its templates seeing the
// arguments as inputs.
func (svc *Services) runLLMTool(ctx context.Context, s *runtime.Scope, d *dsl.Tool, at callSite, args map[string]any) (any, error) {
	ts := s.ToolScope(at.dir, args)
	n := &dsl.Node{ID: at.name, Pos: d.Pos, Kind: dsl.KindLLM}
	l := d.LLM
	c, err := svc.startConversation(ctx, ts, l)
	if err != nil {
		return nil, err
	}
	resp, err := svc.call(ctx, ts, n, c, llm.Request{Temperature: l.Temperature, MaxTokens: l.MaxTokens,
		OutputSchema: l.OutputSchema, SchemaName: d.Name, RepairRetries: l.RepairRetries})
	if err != nil {
		return nil, err
	}
	if l.OutputSchema != nil {
		return resp.JSON, nil
	}
	return resp.Text, nil
}

// builtinSpec declares a built-in tool whose parameters are an object of
// the given properties, the first of which is required.
func builtinSpec(name, description string, props ...property) llm.ToolSpec {
	properties := map[string]any{}
	for _, p := range props {
		properties[p.name] = p.schema
	}
	return llm.ToolSpec{Name: name, Description: description, Parameters: map[string]any{
		"type":                 "object",
		"properties":           properties,
		"required":             []any{props[0].name},
		"additionalProperties": false,
	}}
}

type property struct {
	name   string
	schema map[string]any
}

func stringProperty(name, description string) property {
	return property{name, map[string]any{"type": "string", "description": description}}
}

var readFileSpec = builtinSpec("read_file",
	"Read a text file from the pipeline's directory. Paths are relative to that directory and cannot leave it.",
	stringProperty("path", "Path of the file, relative to the pipeline's directory."))

// readFile returns the file's text; past the cap (limits.max_file_kb) it
// is cut and a last line says where, so that no file reaches the model
// whole only because it exists.
func readFile(ctx context.Context, s *runtime.Scope, _ callSite, args map[string]any) (any, error) {
	path, _ := args["path"].(string)
	head, size, err := s.Pipeline().Files.ReadHead(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("read_file %q: %w", path, err)
	}
	if int64(len(head)) == size {
		return string(head), nil
	}
	return fmt.Sprintf("%s\n[read_file: cut at %d of %d bytes (limits.max_file_kb)]",
		strings.ToValidUTF8(string(head), "\uFFFD"), len(head), size), nil
}

var httpGetSpec = builtinSpec("http_get",
	"Fetch a URL with an HTTP GET request. The result is the response's status code and body (cut off if it is long).",
	stringProperty("url", "An http:// or https:// URL."))

// httpGet fetches raw from an allowed host, following redirects only to
// allowed hosts, and returns {status, body}, with truncated: true when the
// body was cut at cfg.MaxBytes. A status of 400 or more is a result, not
// an error: the model reads it. Only a host listed in allow_hosts may be
// on this machine or a local network (see guardedDialer).
func httpGet(ctx context.Context, cfg *dsl.HTTPGet, raw string) (any, error) {
	allowed := func(u *url.URL) error {
		if u.Scheme != "http" && u.Scheme != "https" {
			return fmt.Errorf("http_get %s: only http and https URLs can be fetched", u.Redacted())
		}
		host := strings.ToLower(u.Hostname())
		if len(cfg.AllowHosts) > 0 && !slices.Contains(cfg.AllowHosts, host) {
			return fmt.Errorf("http_get %s: host %q is not allowed (allowed: %s)", u.Redacted(), host, strings.Join(cfg.AllowHosts, ", "))
		}
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("http_get: %w", err)
	}
	if err := allowed(u); err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// Connect directly: through a proxy, the address checked would be the
	// proxy's, not the host's.
	transport.Proxy = nil
	transport.DialContext = (&guardedDialer{allow: cfg.AllowHosts, lookup: net.DefaultResolver.LookupNetIP,
		dial: (&net.Dialer{}).DialContext}).DialContext
	transport.DisableKeepAlives = true
	client := &http.Client{
		Transport: transport,
		Timeout:   cfg.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			return allowed(req.URL)
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("http_get: %w", err)
	}
	resp, err := client.Do(req)
	var re *restrictedError
	if errors.As(err, &re) {
		return nil, fmt.Errorf("http_get %s: %w", u.Redacted(), re)
	}
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	text, cut, err := redact.Read(resp.Body, cfg.MaxBytes)
	if err != nil {
		return nil, fmt.Errorf("http_get %s: reading the body: %w", u.Redacted(), err)
	}
	out := map[string]any{"status": resp.StatusCode}
	text = strings.ToValidUTF8(text, "\uFFFD")
	if cut {
		out["truncated"] = true
	}
	out["body"] = text
	return out, nil
}

// guardedDialer connects http_get to a host. Unless the host is listed in
// allow_hosts, it resolves the name itself and dials only addresses it has
// checked: none on this machine or a local network (restrictedKind), so a
// name that resolves, or is redirected, to 127.0.0.1, 10.x or the cloud
// metadata address 169.254.169.254 is refused before any packet is sent.
type guardedDialer struct {
	allow  []string
	lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (g *guardedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if slices.Contains(g.allow, strings.ToLower(host)) {
		return g.dial(ctx, network, addr)
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = append(ips, ip)
	} else if ips, err = g.lookup(ctx, "ip", host); err != nil {
		return nil, err
	}
	var refused *restrictedError
	var dialErr error
	for _, ip := range ips {
		ip = ip.Unmap()
		if kind := restrictedKind(ip); kind != "" {
			if refused == nil {
				refused = &restrictedError{host: host, ip: ip, kind: kind}
			}
			continue
		}
		conn, err := g.dial(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return conn, nil
		}
		dialErr = err
	}
	if dialErr != nil {
		return nil, dialErr
	}
	if refused != nil {
		return nil, refused
	}
	return nil, fmt.Errorf("host %q has no address", host)
}

var (
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	sharedCGNAT = netip.MustParsePrefix("100.64.0.0/10")
	broadcast   = netip.MustParseAddr("255.255.255.255")
)

// restrictedKind names what ip is when it is on this machine, on a local
// network or not one host; "" for an ordinary public address.
func restrictedKind(ip netip.Addr) string {
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsUnspecified() || thisNetwork.Contains(ip):
		return "unspecified"
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		return "link-local"
	case ip.IsPrivate():
		return "private"
	case sharedCGNAT.Contains(ip):
		return "shared, CGNAT"
	case ip.IsMulticast() || ip.IsInterfaceLocalMulticast() || ip == broadcast:
		return "multicast or broadcast"
	}
	return ""
}

// restrictedError is a host http_get may not reach on its own.
type restrictedError struct {
	host string
	ip   netip.Addr
	kind string
}

func (e *restrictedError) Error() string {
	what := fmt.Sprintf("host %q resolves to %s", e.host, e.ip)
	if e.host == e.ip.String() {
		what = e.host
	}
	return fmt.Sprintf("%s (%s), which http_get reaches only for a host listed in allow_hosts", what, e.kind)
}

var pythonExecuteSpec = builtinSpec("python_execute",
	"Run a Python snippet in a sandbox (standard library only; no files, network or environment). Returns its stdout, the value of its last expression as result, and the error if it raised.",
	stringProperty("code", "Python source to run."))

var codeExecuteSpec = builtinSpec("code_execute",
	"Run a code snippet in a sandbox (python by default, or go with a main function). Returns its stdout, result and error.",
	stringProperty("code", "Source to run."),
	property{"language", map[string]any{"type": "string", "enum": []any{"python", "go"}, "description": "The code's language; python when omitted."}})

// codeTool runs a snippet for an agent. The reply is what the model needs
// to go on: stdout, the result, and the error if there was one.
func (svc *Services) codeTool(language string) func(context.Context, *runtime.Scope, callSite, map[string]any) (any, error) {
	return func(ctx context.Context, s *runtime.Scope, at callSite, args map[string]any) (any, error) {
		lang := language
		if lang == "" {
			lang, _ = args["language"].(string)
			if lang == "" {
				lang = sandbox.Python
			}
		}
		code, _ := args["code"].(string)
		req := sandbox.Request{Language: lang, Source: code, Limits: limitsFor(s.Pipeline(), dsl.SandboxDefaults{})}
		res, err := svc.runCode(ctx, s, &dsl.Node{ID: at.dir + at.name, Kind: dsl.KindTool}, req)
		if err != nil {
			return nil, err
		}
		reply := map[string]any{"stdout": res.Stdout, "result": res.Result}
		if res.Stderr != "" {
			reply["stderr"] = res.Stderr
		}
		if res.Error != nil {
			reply["error"] = map[string]any{"class": string(res.Error.Class), "message": res.Error.Message, "line": res.Error.Line}
		}
		return reply, nil
	}
}
