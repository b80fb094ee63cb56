package dsl

import (
	"time"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/internal/confined"
	"github.com/flowrun/flowrun/llmconf"
)

// Pipeline is a loaded, checked and compiled pipeline file. It is immutable:
// the runtime reads it from many goroutines and never parses strings again.
type Pipeline struct {
	Path string // as given to Load
	Dir  string // directory that relative paths in the file resolve against
	// Hash is the pipeline's version: a sha256 over every file the load
	// read (Sources), hex. Sources is set on the pipeline that was loaded.
	Hash    string
	Sources []Source
	// Generated is the source text of a pipeline made at load rather than
	// read from a file (a judge metric's): no file exists at Path.
	Generated   string
	Name        string
	Description string
	Inputs      []*Input // in file order
	Models      map[string]*llmconf.Model
	Memories    map[string]*Memory
	Tools       map[string]*Tool
	HTTPGet     *HTTPGet // nil: the built-in http_get tool is off
	Env         []string
	State       []StateVar // in file order
	Limits      Limits
	Sandbox     SandboxDefaults
	Nodes       Block
	Outputs     []*Output // in file order
	Score       *Score    // nil: no score: section
	MCP         map[string]*MCPServer
	// MCPTools are the servers' tool listings, by server name, when the
	// load listed them (Options.ListMCP).
	MCPTools map[string][]MCPTool
	// Files reads the files the pipeline names (prompts, schemas, called
	// pipelines, read_file, render, images): relative to Dir, never outside
	// the directory of the pipeline that was run, at most limits.max_file_kb
	// each. Modules reads wasm modules.
	Files  confined.Dir
	merges map[string]Merge // state variables that declare a merge; nil if none
	// functions are the expression functions it was loaded with, for the
	// metrics compiled against it later (ParseMetric).
	functions Functions
}

// Block is a list of sibling nodes that run in order.
type Block []*Node

// Input is a declared, typed pipeline input.
type Input struct {
	Name        string
	Pos         Pos
	Type        string // string, number, integer, boolean, array, object
	Format      string // "path": a file that must exist
	Description string
	Default     any
	HasDefault  bool
	// Schema is the declaration as a JSON schema document, used to validate
	// a supplied value.
	Schema map[string]any
}

// StateVar is a run-scoped variable and its initial value.
type StateVar struct {
	Name    string
	Initial any
	Type    *Type
	Merge   Merge          // how writes combine; MergeNone replaces
	Schema  map[string]any // declared, when the file gives one
}

// Output is one named value the pipeline returns.
type Output struct {
	Name  string
	Value *Value
	Type  *Type // what the validator knows of the value
}

// Limits bound a whole run.
type Limits struct {
	MaxSteps   int
	MaxCostUSD float64
	// MaxCostPos is where max_cost_usd is written, for a warning about it.
	MaxCostPos Pos
	Timeout    time.Duration
}

// DefaultMaxFileBytes is the cap on a file a pipeline reads unless
// limits.max_file_kb says otherwise: 1 MiB, like http_get's max_bytes.
const DefaultMaxFileBytes = 1 << 20

// MaxModuleBytes caps a wasm module file.
const MaxModuleBytes = 64 << 20

// Modules reads wasm modules: like Files, with MaxModuleBytes as the cap.
func (p *Pipeline) Modules() confined.Dir {
	d := p.Files
	d.MaxBytes, d.Limit = MaxModuleBytes, ""
	return d
}

// SandboxDefaults apply to every code node that does not set its own.
type SandboxDefaults struct {
	Language       string
	Timeout        time.Duration
	MemoryMB       int
	MaxOutputBytes int
}

// Memory is a named conversation that persists across nodes and iterations.
type Memory struct {
	Name   string
	Pos    Pos
	System *Template
}

// Tool is a tool declared in the pipeline file. A tool with neither
// Pipeline nor LLM is a finish tool: the agent's call to it is its answer.
type Tool struct {
	Name        string
	Pos         Pos
	Description string
	Parameters  map[string]any
	Pipeline    *Pipeline // compiled sub-pipeline implementing the tool, if any
	// LLM implements the tool with one model call, if set. Its templates
	// see the call's arguments as inputs.<parameter> (and run and env),
	// never the calling pipeline's inputs, state or nodes.
	LLM *LLM
	// HTTP implements the tool with one HTTP request, if set; its
	// templates see the arguments as an llm tool's do.
	HTTP *HTTPTool
}

// HTTPGet enables the built-in http_get tool and bounds what it fetches.
type HTTPGet struct {
	AllowHosts []string      // host names that may be fetched; empty allows any
	Timeout    time.Duration // per request; 30s unless set
	MaxBytes   int           // the body is cut after this many bytes; 1 MiB unless set
}

// Kind is a node's kind: the one kind key it carries.
type Kind string

// KindSet is a node with no kind key, only set:.
const KindSet Kind = "set"

// Node is one step of a pipeline: the fields every kind has, and the
// configuration of its kind.
type Node struct {
	ID          string
	Pos         Pos
	Kind        Kind
	Description string

	When    *Expr     // skip the node unless true
	Set     []*Assign // state updates after success, in file order
	Next    string    // "" (fall through), a sibling id, "end", "break" or "continue"
	Retry   *Retry
	OnError OnError
	Timeout time.Duration
	Confirm bool

	// Config is what the node's kind decoded from its kind key (*LLM,
	// *Loop, ...: see the kind's file); the kind's accessor reads it.
	Config any
}

// Flow targets that are not node ids.
const (
	NextEnd      = "end"
	NextBreak    = "break"
	NextContinue = "continue"
)

// Assign is one `set:` entry.
type Assign struct {
	Key   string
	Pos   Pos // of the key
	Value *Value
}

// Retry says how often and on which error classes a failing node is retried.
type Retry struct {
	MaxAttempts int
	Backoff     time.Duration
	RetryOn     []errclass.Class // empty: every class in errclass.Retryable
}

// Field is a named value whose strings may interpolate ${{ }}.
type Field struct {
	Name  string
	Value *Value
}

// OnError is what a node's failure leads to: "" or fail (the run fails),
// continue (the next node runs), or the id of a sibling to go to.
type OnError string

// The on_error values that are not a sibling id.
const (
	OnErrorFail     OnError = "fail"
	OnErrorContinue OnError = "continue"
)

// Handled reports whether a failure goes on rather than failing the run.
func (o OnError) Handled() bool { return o != "" && o != OnErrorFail }

// Target is the sibling a handled failure goes to; "" when it fails the
// run or continues.
func (o OnError) Target() string {
	if !o.Handled() || o == OnErrorContinue {
		return ""
	}
	return string(o)
}
