package nodes_test

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/sandbox"
)

// TestHardening04ReadFileToolCapped: as an agent tool, read_file gives the
// model at most limits.max_file_kb of a file, with a last line saying it
// was cut; a file within the cap comes back whole.
func TestHardening04ReadFileToolCapped(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(
		llmtest.Calls(llmtest.Call("read_file", map[string]any{"path": "big.txt"})),
		llmtest.Calls(llmtest.Call("read_file", map[string]any{"path": "notes.txt"})),
		llmtest.Calls(llmtest.Call("answer", map[string]any{"answer": "done"})),
	)
	files := map[string]string{"big.txt": strings.Repeat("0123456789", 300_000), "notes.txt": "flow: a steady stream"}
	for k, v := range agentFiles {
		files[k] = v
	}
	p := load(t, agentTools+`
limits: {max_file_kb: 2}
nodes:
  - id: solve
    agent: {prompt: Read., tools: [read_file], finish: [answer], max_steps: 4}
`, files)
	res, _ := run(t, p, modelKinds(srv, llm.Options{}), nil)
	mustComplete(t, res)
	reqs := srv.Requests()
	big, _ := toolReplies(t, reqs[1])["call_1_1"].(string)
	want := strings.Repeat("0123456789", 300_000)[:2048] + "\n[read_file: cut at 2048 of 3000000 bytes (limits.max_file_kb)]"
	if big != want {
		t.Errorf("the big file's reply has %d bytes, ends %q; want the first 2 KiB and a note", len(big), big[max(0, len(big)-80):])
	}
	if small := toolReplies(t, reqs[2])["call_2_1"]; small != "flow: a steady stream" {
		t.Errorf("a small file = %v", small)
	}
}

// TestHardening06ImagesConfinedAtRun: an image path computed at run time
// is read inside the pipeline directory only, with the same error whether
// the file outside exists or not; a file the user named as an input is
// the user's choice and is read where it is.
func TestHardening06ImagesConfinedAtRun(t *testing.T) {
	png, _ := base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")
	own := filepath.Join(t.TempDir(), "mine.png")
	if err := os.WriteFile(own, png, 0o644); err != nil {
		t.Fatal(err)
	}
	p := load(t, `
version: 1
name: t
inputs:
  prefix: {type: string, default: ""}
  name: {type: string}
models: {default: {model: gpt-4.1-mini}}
nodes:
  - id: look
    llm: {prompt: "What is this?", images: ["${{ inputs.prefix + inputs.name }}"]}
outputs: {text: nodes.look.text}
`, map[string]string{"inside.png": string(png)})
	outside := filepath.Dir(p.Dir)
	if err := os.WriteFile(filepath.Join(outside, "exists.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ prefix, name, err string }{
		{"", "inside.png", ""},
		{"", own, ""}, // the user's own file
		{"../", "exists.png", `images[0]: image "../exists.png": path escapes the pipeline directory`},
		{"../", "missing.png", `images[0]: image "../missing.png": path escapes the pipeline directory`},
		{outside + "/", "exists.png", "path escapes the pipeline directory"},
		{"../", "../../etc/passwd", `images[0]: image "../../../etc/passwd": path escapes the pipeline directory`},
	}
	for _, c := range cases {
		srv := llmtest.New(t)
		srv.Push(llmtest.Text("a pixel"))
		res, _ := run(t, p, modelKinds(srv, llm.Options{}), map[string]any{"prefix": c.prefix, "name": c.name})
		switch {
		case c.err == "" && res.Status != runtime.StatusCompleted:
			t.Errorf("%s%s: %s %v", c.prefix, c.name, res.Status, res.Err)
		case c.err != "" && (res.Status != runtime.StatusFailed || !strings.HasSuffix(res.Err.Error(), c.err) || srv.Calls() != 0):
			t.Errorf("%s%s: %s %v (%d model calls); want a failure ending %q before any call", c.prefix, c.name, res.Status, res.Err, srv.Calls(), c.err)
		}
	}
}

// TestHardening06WasmModuleConfinedAtRun: a wasm module is read inside the
// pipeline directory when the node runs, not only when it loads: a module
// swapped for a link to one outside afterwards is refused.
func TestHardening06WasmModuleConfinedAtRun(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain to build the test module")
	}
	build := t.TempDir()
	if err := os.WriteFile(filepath.Join(build, "main.go"), []byte(`package main

import (
	"encoding/json"
	"os"
)

func main() {
	var args []int
	_ = json.NewDecoder(os.Stdin).Decode(&args)
	json.NewEncoder(os.Stdout).Encode(len(args))
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(build, "go.mod"), []byte("module m\n\ngo 1.22\n"), 0o644)
	cmd := exec.Command("go", "build", "-o", "count.wasm", ".")
	cmd.Dir = build
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the test module: %v\n%s", err, out)
	}
	module, err := os.ReadFile(filepath.Join(build, "count.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	p := load(t, `
version: 1
name: t
nodes:
  - id: count
    code: {language: wasm, module: count.wasm, args: [1, 2, 3]}
outputs: {n: nodes.count.result}
`, map[string]string{"count.wasm": string(module)})
	kinds := codeKinds(t, sandbox.Wasm)
	res, _ := run(t, p, kinds, nil)
	mustComplete(t, res)
	if res.Outputs["n"] != 3 {
		t.Fatalf("outputs %v", res.Outputs)
	}
	inside := filepath.Join(p.Dir, "count.wasm")
	if err := os.Rename(filepath.Join(build, "count.wasm"), filepath.Join(filepath.Dir(p.Dir), "count.wasm")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(inside); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../count.wasm", inside); err != nil {
		t.Skipf("symbolic links: %v", err)
	}
	res, _ = run(t, p, kinds, nil)
	if res.Status != runtime.StatusFailed || !strings.HasSuffix(res.Err.Error(), `module "count.wasm": path escapes the pipeline directory`) {
		t.Fatalf("a module swapped for a link outside: %s %v", res.Status, res.Err)
	}
}

// TestRemoteInputsNameNoFileOutside: inputs from a remote caller (web,
// MCP serve, a cluster job) may give an image as data or as a path inside
// the pipeline directory; a path outside is refused before any model
// call, though the same path from the local user is read.
func TestRemoteInputsNameNoFileOutside(t *testing.T) {
	const pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
	png, _ := base64.StdEncoding.DecodeString(pixel)
	elsewhere := filepath.Join(t.TempDir(), "secret.png")
	if err := os.WriteFile(elsewhere, png, 0o644); err != nil {
		t.Fatal(err)
	}
	p := load(t, `
version: 1
name: t
inputs:
  image: {type: string, format: path}
models: {default: {model: gpt-4.1-mini}}
nodes:
  - id: look
    llm: {prompt: "What is this?", images: ["${{ inputs.image }}"]}
outputs: {text: nodes.look.text}
`, map[string]string{"inside.png": string(png)})
	cases := []struct {
		image  string
		remote bool
		err    string
	}{
		{elsewhere, false, ""},
		{elsewhere, true, `input "image": "` + elsewhere + `": path escapes the pipeline directory (a remote caller gives a file as data, or names one inside the pipeline's directory)`},
		{elsewhere + ".missing", true, `input "image": "` + elsewhere + `.missing": path escapes the pipeline directory (a remote caller gives a file as data, or names one inside the pipeline's directory)`},
		{"inside.png", true, ""},
		{"data:image/png;base64," + pixel, true, ""},
	}
	for _, c := range cases {
		srv := llmtest.New(t)
		srv.Push(llmtest.Text("a pixel"))
		res := runtime.Run(t.Context(), modelKinds(srv, llm.Options{}), p, map[string]any{"image": c.image},
			runtime.Options{RemoteInputs: c.remote})
		switch {
		case c.err == "" && res.Status != runtime.StatusCompleted:
			t.Errorf("%s (remote %v): %s %v", c.image, c.remote, res.Status, res.Err)
		case c.err != "" && (res.Status != runtime.StatusFailed || !strings.HasSuffix(res.Err.Error(), c.err) || srv.Calls() != 0):
			t.Errorf("%s (remote %v): %s %v (%d model calls); want a failure ending %q before any call", c.image, c.remote, res.Status, res.Err, srv.Calls(), c.err)
		}
	}
}
