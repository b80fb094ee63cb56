// Package codefence finds the code in a model's reply: the fenced blocks
// (```lang ... ```, the fences possibly indented). Block is strict, for
// code that will run: a reply with no block is an error, never prose run
// as code. BlockOrText is lenient, for a reply that may be bare code or
// bare JSON.
package codefence

import (
	"fmt"
	"regexp"
	"strings"
)

var fenceRE = regexp.MustCompile("(?ms)^[ \t]*```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)^[ \t]*```")

// BlockOrText returns the last fenced code block in text, preferring blocks
// tagged with lang. Text with no fence is returned trimmed, as models often
// answer with bare code.
func BlockOrText(text, lang string) string {
	matches := fenceRE.FindAllStringSubmatch(text, -1)
	if len(matches) == 0 {
		return strings.TrimSpace(text)
	}
	for i := len(matches) - 1; i >= 0; i-- {
		if lang == "" || strings.EqualFold(matches[i][1], lang) {
			return strings.TrimRight(matches[i][2], "\n")
		}
	}
	return strings.TrimRight(matches[len(matches)-1][2], "\n")
}

// langAliases are the fence tags models use for a language.
var langAliases = map[string][]string{
	"python": {"python", "py", "python3"},
	"go":     {"go", "golang"},
}

// Block is the expression function extract_code: the last fenced block
// tagged lang (or one of its usual aliases), or the only block when there
// is just one. A text with no block is an error, so that a reply without
// code fails loudly instead of running prose.
func Block(text, lang string) (string, error) {
	blocks := fenceRE.FindAllStringSubmatch(text, -1)
	if len(blocks) == 0 {
		return "", fmt.Errorf("extract_code: no code block in the text (expected a fenced block: ```%s ... ```)", lang)
	}
	if lang == "" {
		return strings.TrimRight(blocks[len(blocks)-1][2], "\n"), nil
	}
	tags := langAliases[strings.ToLower(lang)]
	if tags == nil {
		tags = []string{strings.ToLower(lang)}
	}
	for i := len(blocks) - 1; i >= 0; i-- {
		for _, t := range tags {
			if strings.EqualFold(blocks[i][1], t) {
				return strings.TrimRight(blocks[i][2], "\n"), nil
			}
		}
	}
	if len(blocks) == 1 {
		return strings.TrimRight(blocks[0][2], "\n"), nil
	}
	return "", fmt.Errorf("extract_code: no %s code block among the text's %d blocks", lang, len(blocks))
}
