package dsl

// Body is one block a node runs as part of itself: a loop or map body, or
// a named parallel branch.
type Body struct {
	Name string // the parallel branch's name; "" otherwise
	Body Block
}

// pipelineOutputs is the type of a called pipeline's outputs.
func pipelineOutputs(p *Pipeline) *Type {
	if p == nil {
		return AnyType
	}
	fields := make(map[string]*Type, len(p.Outputs))
	for _, o := range p.Outputs {
		fields[o.Name] = o.Type
		if o.Type == nil {
			fields[o.Name] = AnyType
		}
	}
	return Object(fields)
}

// toolResult is the type of what a tool returns.
func toolResult(p *Pipeline, name string) *Type {
	if t, ok := mcpToolResult(p, name); ok {
		return t
	}
	if t := p.Tools[name]; t != nil {
		switch {
		case t.Pipeline != nil:
			return pipelineOutputs(t.Pipeline)
		case t.LLM != nil:
			return llmOutput(t.LLM)
		case t.HTTP != nil:
			return httpResult
		}
		return AnyType
	}
	switch name {
	case "read_file":
		return StringType
	case "http_get":
		return httpResult
	case "python_execute", "code_execute":
		return Object(map[string]*Type{"stdout": StringType, "result": AnyType, "error": sandboxErrorType})
	}
	return AnyType
}

// outputType is the type of nodes.<id> once n has run.
func outputType(r *resolver, n *Node) *Type {
	if n.Kind == KindSet {
		fields := map[string]*Type{}
		for _, a := range n.Set {
			fields[a.Key] = r.valueType(a.Value)
		}
		return Object(fields)
	}
	if s := specs[n.Kind]; s != nil && n.Config != nil {
		return s.output(r, n)
	}
	return AnyType
}
