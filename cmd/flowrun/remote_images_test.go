package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/flowrun/flowrun/llm/llmtest"
)

const lookPipeline = `
version: 1
name: look
inputs:
  image: {type: string, format: path}
models: {default: {model: gpt-4.1-mini}}
nodes:
  - id: look
    llm: {prompt: "What is this?", images: ["${{ inputs.image }}"]}
outputs: {text: nodes.look.text}
`

const pixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"

// outsidePNG writes an image outside any served directory.
func outsidePNG(t *testing.T) string {
	png, _ := base64.StdEncoding.DecodeString(pixelPNG)
	path := filepath.Join(t.TempDir(), "private.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const outsideRefused = "path escapes the pipeline directory (a remote caller gives a file as data, or names one inside the pipeline's directory)"

// An MCP client may give an image as data, not as a path to a file
// outside the served directory: that call fails before any model call.
func TestMCPServeImageInputsStayInsideDir(t *testing.T) {
	srv := llmtest.New(t)
	useModel(t, srv)
	srv.Push(llmtest.Text("a pixel"))
	dir := t.TempDir()
	writeFile(t, dir, "look.yaml", lookPipeline)
	cs, stderr := connectServe(t, nil, dir)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "look", Arguments: map[string]any{"image": outsidePNG(t)}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(jsonText(res.Content), outsideRefused) || srv.Calls() != 0 {
		t.Fatalf("a file outside DIR: %s (%d model calls)\n%s", jsonText(res), srv.Calls(), stderr)
	}
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "look", Arguments: map[string]any{"image": "data:image/png;base64," + pixelPNG}})
	if err != nil || res.IsError {
		t.Fatalf("an image as data: %v %s\n%s", err, jsonText(res), stderr)
	}
	if got := string(srv.Last().Raw); !strings.Contains(got, pixelPNG) {
		t.Errorf("the model did not get the image: %s", got)
	}
}

// The web form's inputs are a remote caller's too.
func TestServeImageInputsStayInsideDir(t *testing.T) {
	srv := llmtest.New(t)
	useModel(t, srv)
	dir := t.TempDir()
	writeFile(t, dir, "look.yaml", lookPipeline)
	base, _ := serve(t, dir)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(base + "start?pipeline=look.yaml")
	if err != nil {
		t.Fatal(err)
	}
	form, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csrf := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindSubmatch(form)
	if csrf == nil {
		t.Fatalf("no CSRF token in the start form:\n%s", form)
	}
	vals := url.Values{"csrf": {string(csrf[1])}, "pipeline": {"look.yaml"}, "in.image": {outsidePNG(t)}}
	req, _ := http.NewRequest(http.MethodPost, base+"start", strings.NewReader(vals.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", strings.TrimSuffix(base, "/"))
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back := resp.Header.Get("Location")
	if strings.HasPrefix(back, "/runs/") {
		t.Fatalf("a run started with a file outside the served directory: %s", back)
	}
	resp, err = client.Get(base + strings.TrimPrefix(back, "/"))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "path escapes the pipeline directory") || srv.Calls() != 0 {
		t.Fatalf("the form did not say why (%d model calls):\n%s", srv.Calls(), page)
	}

	// An uploaded image is the value itself, as a data URL.
	srv.Push(llmtest.Text("a pixel"))
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("csrf", string(csrf[1]))
	_ = mw.WriteField("pipeline", "look.yaml")
	fw, _ := mw.CreateFormFile("file.image", "private.png")
	png, _ := base64.StdEncoding.DecodeString(pixelPNG)
	_, _ = fw.Write(png)
	mw.Close()
	req, _ = http.NewRequest(http.MethodPost, base+"start", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Origin", strings.TrimSuffix(base, "/"))
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	run, ok := strings.CutPrefix(resp.Header.Get("Location"), "/runs/")
	if !ok {
		t.Fatalf("an uploaded image did not start a run: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	for deadline := time.Now().Add(time.Minute); srv.Calls() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("run %s never called the model", run)
		}
	}
	if !strings.Contains(string(srv.Last().Raw), "data:image/png;base64,"+pixelPNG) {
		t.Error("the model did not get the uploaded image")
	}
}

// A run an MCP client started keeps its inputs a remote caller's when the
// local CLI resumes it: its image, named inside the pipeline's directory,
// is found there, not in the CLI's working directory.
func TestRemoteRunResumedByTheCLIKeepsItsRule(t *testing.T) {
	srv := llmtest.New(t)
	useModel(t, srv)
	srv.Push(llmtest.Text("a pixel"))
	dir := t.TempDir()
	png, _ := base64.StdEncoding.DecodeString(pixelPNG)
	writeFile(t, dir, "pixel.png", string(png))
	writeFile(t, dir, "ask.yaml", `
version: 1
name: look_later
inputs:
  image: {type: string, format: path}
models: {default: {model: gpt-4.1-mini}}
nodes:
  - id: go
    ask: {question: "Look now?", schema: {type: string}}
  - id: look
    llm: {prompt: "What is this?", images: ["${{ inputs.image }}"]}
outputs: {text: nodes.look.text}
`)
	cs, stderr := connectServe(t, nil, dir)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "look_later", Arguments: map[string]any{"image": "pixel.png"}})
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`flowrun resume (\S+) --answer`).FindStringSubmatch(jsonText(res.Content))
	if m == nil {
		t.Fatalf("the run does not wait: %s\n%s", jsonText(res), stderr)
	}
	if code, stdout, stderr := flowrun(t, "resume", m[1], "--answer", "yes"); code != exitOK || !strings.Contains(stdout, "a pixel") {
		t.Fatalf("resuming by the CLI: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(string(srv.Last().Raw), pixelPNG) {
		t.Error("the model did not get the image")
	}
}
