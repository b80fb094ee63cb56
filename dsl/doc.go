// Package dsl turns a pipeline file into a checked, compiled, immutable
// *Pipeline, or into every problem found, each with its file:line:col, the
// source line and a caret.
//
// It works in phases, which load.go runs in order, each handing the next
// what it guarantees:
//
//   - syntax (yamlsyntax.go, yamlnode.go, schema.go): YAML through yaml.v3's
//     Node API, so every value keeps its position; one document, no
//     duplicate keys, no alias bombs; then the JSON schema (Schema, of which
//     schemas/pipeline.schema.json is a copy for editors) with errors mapped
//     back to positions.
//   - decode (decode.go, node.go, kind_*.go): typed structures. Each node
//     kind is one KindSpec in its own file: its config type, decoder, schema
//     fragment, output type, bodies and reference text. Every template and
//     expression is compiled here, once (compile.go), and queued.
//   - resolve (resolve.go, types.go, outputs.go, merge.go): names, flow and
//     types. Every node's output has a type; every queued expression is
//     checked against the types of the names it reads; calls, tools and
//     state writes are checked across files and branches.
//
// Every numeric limit has a maximum (Maxima, MaxDuration) that the schema
// carries, so no value overflows or reads as "no limit" later. Every
// evaluation of an expression or template is bounded (guard.go,
// ExpressionBudget) and stops when its environment's context is
// cancelled: no expression can hold a node past its timeout or exhaust
// the process's memory.
//
// The runtime reads the result from many goroutines and never parses a
// string again. Files are read only through the pipeline's confined
// directory (Pipeline.Files), and every file read is kept (Sources) so that
// a resume can tell when any of them changed.
package dsl
