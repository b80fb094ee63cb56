package codefence

import (
	"strings"
	"testing"
)

func TestBlock(t *testing.T) {
	tests := []struct {
		name, text, lang, want, err string
	}{
		{"tagged", "Here:\n```python\nprint(1)\n```\nDone.", "python", "print(1)", ""},
		{"alias", "```py\nx = 1\n```", "python", "x = 1", ""},
		{"last of the language", "```python\na\n```\n```go\ng\n```\n```python\nb\n```", "python", "b", ""},
		{"the only block", "```\nbare\n```", "python", "bare", ""},
		{"no language: last", "```go\ng\n```\n```python\np\n```", "", "p", ""},
		{"none", "just prose", "python", "", "no code block in the text"},
		{"none of the language", "```go\ng\n```\n```rust\nr\n```", "python", "", "no python code block among the text's 2 blocks"},
	}
	for _, tt := range tests {
		got, err := Block(tt.text, tt.lang)
		if got != tt.want || (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s: Block(%q, %q) = %q, %v; want %q, %q", tt.name, tt.text, tt.lang, got, err, tt.want, tt.err)
		}
	}
}

func TestBlockOrText(t *testing.T) {
	tests := []struct {
		name, text, lang, want string
	}{
		{"bare code", "  x = 1\n", "", "x = 1"},
		{"one fence", "Here:\n```python\nprint(1)\n```\nDone.", "", "print(1)"},
		{"last fence wins", "```\na\n```\ntext\n```\nb\n```", "", "b"},
		{"language preferred", "```python\np\n```\n```go\ng\n```", "python", "p"},
		{"language missing: last", "```python\np\n```\n```go\ng\n```", "rust", "g"},
		{"indented fence", "  ```py\n  x\n  ```", "py", "  x"},
	}
	for _, tt := range tests {
		if got := BlockOrText(tt.text, tt.lang); got != tt.want {
			t.Errorf("%s: BlockOrText(%q, %q) = %q, want %q", tt.name, tt.text, tt.lang, got, tt.want)
		}
	}
}
