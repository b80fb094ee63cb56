package mcpserve

import (
	"testing"

	"github.com/flowrun/flowrun/runtime"
)

// TestElicitationCarriesTheQuestionsContext: the form an MCP client is
// asked to fill says what will run and what led there, as the CLI's
// prompt does.
func TestElicitationCarriesTheQuestionsContext(t *testing.T) {
	q := &runtime.Question{Path: "write", Kind: runtime.QuestionConfirm, Text: "run write?", Context: &runtime.QuestionContext{
		Kind: "llm", Model: "gpt-4.1-mini", Prompt: "Write about birds", After: "outline", Output: "notes"}}
	got := elicitation(q).Message
	want := "Running write needs your confirmation.\n\nwill run: llm node write, model gpt-4.1-mini\nprompt:\n  Write about birds\nafter outline, whose output was:\n  notes"
	if got != want {
		t.Errorf("message:\n%s\nwant:\n%s", got, want)
	}
	if plain := elicitation(&runtime.Question{Path: "a", Kind: runtime.QuestionAsk, Text: "who?"}).Message; plain != "who?" {
		t.Errorf("a question without context: %q", plain)
	}
}
