package dsl

// Body is one block a node runs as part of itself: a loop or map body, or
// a named parallel branch.
type Body struct {
	Name string // the parallel branch's name; "" otherwise
	Body Block
}

// usageType is the shape of a model call's token counts.
var usageType = Object(map[string]*Type{"prompt": IntType, "completion": IntType, "reasoning": IntType, "cached": IntType, "total": IntType})

// sandboxErrorType is the shape of a code run's error.
var sandboxErrorType = Object(map[string]*Type{"class": StringType, "message": StringType, "line": IntType})

func llmOutput(l *LLM) *Type {
	json := AnyType
	if l.OutputSchema != nil {
		json = TypeFromSchema(l.OutputSchema)
	}
	return Object(map[string]*Type{"text": StringType, "json": json, "finish_reason": StringType,
		"usage": usageType, "cost_usd": FloatType, "model": StringType})
}

// agentOutput types finish.args by the finish tools' parameters: a field
// any of them declares may be read; one none declares is a mistake.
func agentOutput(p *Pipeline, a *Agent) *Type {
	var args *Type
	for _, name := range a.Finish {
		if t := p.Tools[name]; t != nil {
			args = Join(args, TypeFromSchema(t.Parameters))
		}
	}
	if args == nil {
		args = AnyType
	}
	finish := Object(map[string]*Type{"name": StringType, "args": args})
	return Object(map[string]*Type{"finish": finish, "steps": IntType, "text": StringType,
		"usage": usageType, "cost_usd": FloatType})
}

func codeOutput(c *Code) *Type {
	result := AnyType
	if c.ResultSchema != nil {
		result = TypeFromSchema(c.ResultSchema)
	}
	return Object(map[string]*Type{"ok": BoolType, "result": result, "stdout": StringType, "stderr": StringType,
		"error": sandboxErrorType, "duration_ms": FloatType})
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
	if t := p.Tools[name]; t != nil {
		switch {
		case t.Pipeline != nil:
			return pipelineOutputs(t.Pipeline)
		case t.LLM != nil:
			return llmOutput(t.LLM)
		}
		return AnyType
	}
	switch name {
	case "read_file":
		return StringType
	case "http_get":
		return Object(map[string]*Type{"status": IntType, "body": StringType, "truncated": BoolType})
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
