package nodes_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
)

func TestToolNode(t *testing.T) {
	p := load(t, `
version: 1
name: t
tools:
  shout:
    description: Upper-case a word.
    parameters: {type: object, properties: {word: {type: string}}, required: [word]}
    pipeline: shout.yaml
nodes:
  - id: read
    tool: {name: read_file, args: {path: '"notes.txt"'}}
  - id: loud
    tool: {name: shout, args: {word: "${{ trim(nodes.read) }}"}}
outputs: {read: nodes.read, loud: nodes.loud.text}
`, map[string]string{"notes.txt": "hello\n", "shout.yaml": `
version: 1
name: shout
inputs: {word: {type: string}}
nodes:
  - id: up
    set: {}
outputs: {text: upper(inputs.word)}
`})
	res, rec := run(t, p, nodes.Kinds(nodes.Services{}), nil)
	mustComplete(t, res)
	if res.Outputs["read"] != "hello\n" || res.Outputs["loud"] != "HELLO" {
		t.Fatalf("outputs %v", res.Outputs)
	}
	if got := rec.Paths(runtime.EventNodeFinished); strings.Join(got, " ") != "read loud/up loud" {
		t.Fatalf("paths %v", got)
	}
}

func TestToolNodeErrors(t *testing.T) {
	cases := []struct{ args, want string }{
		{`{path: 5}`, `args do not match tool "read_file"'s parameters`},
		{`{path: '"../secret.txt"'}`, `read_file "../secret.txt": path escapes the pipeline directory`},
	}
	for _, c := range cases {
		p := load(t, "version: 1\nname: t\nnodes:\n  - id: r\n    tool: {name: read_file, args: "+c.args+"}\n", nil)
		// The file exists, just outside the pipeline's directory.
		if err := os.WriteFile(filepath.Join(filepath.Dir(p.Dir), "secret.txt"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		res, _ := run(t, p, nodes.Kinds(nodes.Services{}), nil)
		if res.Status != runtime.StatusFailed || !strings.Contains(res.Err.Error(), c.want) {
			t.Errorf("args %s: status %s err %v, want %q", c.args, res.Status, res.Err, c.want)
		}
	}
	p := load(t, "version: 1\nname: t\nnodes:\n  - id: py\n    tool: {name: python_execute, args: {code: '\"print(1)\"'}}\n", nil)
	if err := nodes.Kinds(nodes.Services{}).Check(p); err == nil || !strings.Contains(err.Error(), "tool python_execute runs code in the sandbox, which is not available here") {
		t.Fatalf("preflight: %v", err)
	}
}
