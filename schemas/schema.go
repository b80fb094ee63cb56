// Package schemas holds the embedded JSON schema (draft 2020-12) that is the
// single source of truth for pipeline syntax. The dsl package validates every
// pipeline file against it, and editors use the same file (through a
// `# yaml-language-server: $schema=` comment) for completion and hover help.
package schemas

import _ "embed"

// Pipeline is the JSON schema of a pipeline file (pipeline.schema.json).
//
//go:embed pipeline.schema.json
var Pipeline []byte

// PipelineURL is the $id of the pipeline schema.
const PipelineURL = "https://flowrun.dev/schemas/pipeline.schema.json"
