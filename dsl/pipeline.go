package dsl

import (
	"time"

	"github.com/flowrun/flowrun/internal/confined"
)

// Pipeline is a loaded, checked and compiled pipeline file. It is immutable:
// the runtime reads it from many goroutines and never parses strings again.
type Pipeline struct {
	Path        string // as given to Load
	Dir         string // directory that relative paths in the file resolve against
	Hash        string // sha256 of the file's bytes, hex
	Name        string
	Description string
	Inputs      []*Input // in file order
	Models      map[string]*Model
	Memories    map[string]*Memory
	Tools       map[string]*Tool
	HTTPGet     *HTTPGet // nil: the built-in http_get tool is off
	Env         []string
	State       []StateVar // in file order
	Limits      Limits
	Sandbox     SandboxDefaults
	Nodes       Block
	Outputs     []*Output // in file order
	// Files reads the files the pipeline names (prompts, schemas, called
	// pipelines, read_file, render, images): relative to Dir, never outside
	// the directory of the pipeline that was run, at most limits.max_file_kb
	// each. Modules reads wasm modules.
	Files  confined.Dir
	merges map[string]Merge // state variables that declare a merge; nil if none
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

// The largest sandbox limits a pipeline may ask for: a wasm32 guest
// addresses at most 4 GiB, and the host holds each of stdout, stderr and the
// result of a run in memory.
const (
	MaxSandboxMemoryMB    = 4096
	MaxSandboxOutputBytes = 256 << 20
)

// SandboxDefaults apply to every code node that does not set its own.
type SandboxDefaults struct {
	Language       string
	Timeout        time.Duration
	MemoryMB       int
	MaxOutputBytes int
}

// Model is a named model configuration.
type Model struct {
	Name            string
	Pos             Pos
	Model           string
	API             string // chat (default) or responses
	Temperature     *float64
	TopP            *float64
	MaxTokens       int
	Seed            *int
	ReasoningEffort string
	Verbosity       string
	BaseURL         string
	APIKeyEnv       string
	RPM, TPM        int
	MaxConcurrency  int
	Timeout         time.Duration
	Price           *Price
}

// Price overrides the built-in price table for a model, in USD per million tokens.
type Price struct {
	InputPerMTok       float64
	OutputPerMTok      float64
	CachedInputPerMTok float64
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
}

// HTTPGet enables the built-in http_get tool and bounds what it fetches.
type HTTPGet struct {
	AllowHosts []string      // host names that may be fetched; empty allows any
	Timeout    time.Duration // per request; 30s unless set
	MaxBytes   int           // the body is cut after this many bytes; 1 MiB unless set
}

// Kind is a node's kind: the one kind key it carries.
type Kind string

const (
	KindSet      Kind = "set"
	KindLLM      Kind = "llm"
	KindAgent    Kind = "agent"
	KindTool     Kind = "tool"
	KindCode     Kind = "code"
	KindBranch   Kind = "branch"
	KindLoop     Kind = "loop"
	KindMap      Kind = "map"
	KindParallel Kind = "parallel"
	KindCall     Kind = "call"
	KindAsk      Kind = "ask"
)

// kindKeys lists the kind keys in the order the loader looks for them.
var kindKeys = []Kind{KindLLM, KindAgent, KindTool, KindCode, KindBranch, KindLoop, KindMap, KindParallel, KindCall, KindAsk}

// Node is one step of a pipeline. Exactly one of the kind fields (Branch,
// Loop, ...) is set, matching Kind; a set node has none.
type Node struct {
	ID          string
	Pos         Pos
	Kind        Kind
	Description string

	When    *Expr     // skip the node unless true
	Set     []*Assign // state updates after success, in file order
	Next    string    // "" (fall through), a sibling id, "end", "break" or "continue"
	Retry   *Retry
	OnError string // "" or "fail", "continue", or a sibling id
	Timeout time.Duration
	Confirm bool

	Branch   *Branch
	Loop     *Loop
	Map      *Map
	Parallel *Parallel
	Call     *Call
	LLM      *LLM
	Agent    *Agent
	Code     *Code
	Tool     *ToolCall
	Ask      *Ask
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
	RetryOn     []string
}

// Branch is a list of cases; the first whose When holds wins.
type Branch struct {
	Cases   []*Case
	Default string // where to go when no case holds; "" falls through
}

// Case is one branch case.
type Case struct {
	When *Expr
	Set  []*Assign
	Next string
}

// Loop runs Body until Until holds or while While holds, at most MaxIterations times.
type Loop struct {
	MaxIterations int
	Until         *Expr
	While         *Expr
	OnExhausted   string // continue (default) or fail
	Body          Block
}

// Map runs Body once per element of Over.
type Map struct {
	Over           *Expr
	MaxConcurrency int
	OnItemError    string // fail (default) or skip
	Result         *Expr
	Body           Block
}

// Parallel runs named branches concurrently and joins them.
type Parallel struct {
	Branches       []*ParallelBranch // in declaration order
	Result         *Expr
	MaxConcurrency int
}

// ParallelBranch is one named branch of a parallel node.
type ParallelBranch struct {
	Name string
	Body Block
}

// Call runs another pipeline file.
type Call struct {
	Path     string
	Pipeline *Pipeline
	Inputs   []*Field
}

// Field is a named value whose strings may interpolate ${{ }}.
type Field struct {
	Name  string
	Value *Value
}

// LLM is one model call.
type LLM struct {
	Model         string
	System        *Template
	Prompt        *Template
	Images        []*Value // each a path or URL, or a list of them
	Memory        string
	OutputSchema  map[string]any
	RepairRetries int
	Temperature   *float64
	MaxTokens     int
}

// Agent is a tool-calling loop.
type Agent struct {
	LLM
	Tools       []string
	Finish      []string
	MaxSteps    int
	ToolRetries int
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

// ToolCall calls one registered tool.
type ToolCall struct {
	Name string
	Args *Value
}

// Ask asks the human.
type Ask struct {
	Question *Template
	Schema   map[string]any
	Default  any
}
