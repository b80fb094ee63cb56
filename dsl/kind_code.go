package dsl

import (
	"gopkg.in/yaml.v3"
)

// KindCode is the code node kind.
const KindCode Kind = "code"

func init() {
	registerKind(&KindSpec{
		Kind:    KindCode,
		Summary: "Run code in the WebAssembly sandbox.",
		Doc:     "Runs code in the WebAssembly sandbox: `python` (CPython 3.13 for WASI), `go` (compiled to wasip1) or `wasm` (a module the pipeline brings). `call` names a function to call with `args`; its return value is `result`, typed and checked by `result_schema` when given. What the code does (a compile error, an exception, a timeout, a limit) is data: `ok` is false and `error` says what happened, so a refine loop can feed it back to a model.",
		Output:  "`{ok, result, stdout, stderr, error: {class, message, line}, duration_ms}`.",
		Example: `- id: test
  code:
    language: python
    source: |
      def transform(grid):
          return [row[::-1] for row in grid]
    call: transform
    args: [inputs.grid]
    limits: {timeout: 5s, memory_mb: 256}`,
		Schema: `{
  "description": "Run code in the WebAssembly sandbox.",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "language": {
      "description": "Language of the code (default \u0060sandbox.language\u0060).",
      "type": "string",
      "enum": [
        "python",
        "go",
        "wasm"
      ]
    },
    "source": {
      "$ref": "#/$defs/prompt",
      "description": "Source code, inline or \u0060{file: path}\u0060; \u0060${{ expr }}\u0060 is interpolated."
    },
    "module": {
      "description": "Path of a WebAssembly module to run, for \u0060language: wasm\u0060: relative to the pipeline file, inside the pipeline directory, at most 64 MiB.",
      "type": "string"
    },
    "call": {
      "description": "Name of the function to call with \u0060args\u0060; its return value is \u0060result\u0060.",
      "type": "string"
    },
    "args": {
      "description": "Arguments for \u0060call\u0060: a list of positional arguments, or any other value passed as the one argument. Each string is an expression (quote text: '\"x\"')."
    },
    "result_schema": {
      "description": "JSON schema of the value \u0060call\u0060 returns: it types \u0060nodes.<id>.result\u0060 for the validator, and a result that does not match it is a \u0060bad_result\u0060 error.",
      "type": "object"
    },
    "limits": {
      "description": "Limits for this execution, overriding \u0060sandbox:\u0060.",
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "timeout": {
          "$ref": "#/$defs/duration",
          "description": "Kill the code if it runs longer than this."
        },
        "memory_mb": {
          "description": "Memory limit of the execution, in MiB (at most 4096: a WebAssembly guest addresses 4 GiB).",
          "type": "integer",
          "minimum": 1
        },
        "max_output_kb": {
          "description": "Cap, in KiB, on each of stdout, stderr and the result (at most 262144); a run that floods is stopped, keeping what came before.",
          "type": "integer",
          "minimum": 1
        }
      }
    }
  }
}`,
		decode: func(d *nodeDecoder) any { return d.f.code(d.label, d.v, d.sc) },
		output: func(_ *resolver, n *Node) *Type { return codeOutput(n.Code()) },
	})
}

// Code runs code in the sandbox.
type Code struct {
	Language string
	Source   *Template
	Module   string
	Call     string
	Args     *Value
	Limits   SandboxDefaults
	// ResultSchema, when given, types and checks the code's result.
	ResultSchema map[string]any
}

// Code is the configuration of a code node; nil for a node of another kind.
func (n *Node) Code() *Code { return Config[*Code](n) }

func (f *file) code(label string, v *yaml.Node, sc scope) *Code {
	c := &Code{Language: f.p.Sandbox.Language}
	if l, ok := str(valueOf(v, "language")); ok {
		c.Language = l
	}
	if c.Language == "" {
		c.Language = "python"
	}
	if s := valueOf(v, "source"); s != nil {
		c.Source = f.prompt(s, sc)
	}
	if mn := valueOf(v, "module"); mn != nil {
		c.Module, _ = str(mn)
		if err := f.p.Modules().Check(c.Module); err != nil {
			f.l.errorf(f.pos(mn), "%s: module file %q: %s", label, c.Module, f.fileProblem(c.Module, err))
		}
	}
	switch {
	case c.Language == "wasm" && c.Module == "":
		f.l.errorf(f.pos(v), "%s: language wasm needs module: (a .wasm file)", label)
	case c.Language != "wasm" && c.Source == nil:
		f.l.errorf(f.pos(v), "%s: code needs source: (inline, or {file: ...})", label)
	}
	c.Call, _ = str(valueOf(v, "call"))
	if a := valueOf(v, "args"); a != nil {
		c.Args = f.value(a, sc)
	}
	c.Limits = f.sandboxLimits(valueOf(v, "limits"), label+": code.limits")
	if rs := valueOf(v, "result_schema"); rs != nil {
		c.ResultSchema = mapOf(rs)
		f.checkJSONSchema(rs, label+": result_schema", c.ResultSchema)
	}
	return c
}

// sandboxErrorType is the shape of a code run's error.
var sandboxErrorType = Object(map[string]*Type{"class": StringType, "message": StringType, "line": IntType})

func codeOutput(c *Code) *Type {
	result := AnyType
	if c.ResultSchema != nil {
		result = TypeFromSchema(c.ResultSchema)
	}
	return Object(map[string]*Type{"ok": BoolType, "result": result, "stdout": StringType, "stderr": StringType,
		"error": sandboxErrorType, "duration_ms": FloatType})
}
