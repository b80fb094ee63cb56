package eventview

import (
	"fmt"
	"strings"

	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/runtime"
)

// contextLines is how many lines of a prompt, code or output the text of
// a question's context shows; the web UI shows them whole.
const contextLines = 20

// QuestionContext is q's context as people read it at a prompt, a line
// each (blocks of text indented under their heading): what will run and
// the output that led there. Nothing when q has no context.
func QuestionContext(q *runtime.Question) []string {
	c := q.Context
	if c == nil {
		return nil
	}
	var out []string
	if q.Kind == runtime.QuestionConfirm {
		line := "will run: " + c.Kind + " node " + q.Path
		if c.Model != "" {
			line += ", model " + c.Model
		}
		out = append(out, line)
		if len(c.Tools) > 0 {
			out = append(out, "tools: "+strings.Join(c.Tools, ", "))
		}
		if c.Tool != "" {
			out = append(out, "tool: "+c.Tool+" with "+Fold(c.Args))
		}
		out = block(out, "system:", c.System)
		out = block(out, "prompt:", c.Prompt)
		if c.Language != "" {
			out = block(out, "code ("+c.Language+"):", c.Code)
		}
	}
	if c.After != "" {
		out = block(out, "after "+c.After+", whose output was:", asIndentedJSON(c.Output))
	}
	return out
}

// block adds text under its heading, indented, cut to contextLines.
func block(out []string, heading, text string) []string {
	if text == "" {
		return out
	}
	out = append(out, heading)
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > contextLines {
		lines = append(lines[:contextLines], fmt.Sprintf("(%d more lines)", len(lines)-contextLines))
	}
	for _, l := range lines {
		out = append(out, "  "+l)
	}
	return out
}

// asIndentedJSON is v as indented JSON, a string as it is.
func asIndentedJSON(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := jsonvalue.MarshalIndent(v, "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
