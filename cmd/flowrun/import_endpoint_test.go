package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// A configuration whose provider is an application behind an HTTP
// endpoint (promptfoo's http provider) imports as an http tool the
// pipeline calls: each item sends its prompt and vars in the body, as
// promptfoo renders them (a number as its text, a JSON-text body
// parsed), and its asserts check the field transformResponse names.
func TestImportPromptfooHTTPEndpoint(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	var mu sync.Mutex
	var bodies []map[string]any
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b map[string]any
		_ = json.NewDecoder(r.Body).Decode(&b)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		if r.URL.Path != "/chat" || r.Header.Get("X-Team") != "qa" {
			http.Error(w, "wrong request", http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"reply": map[string]any{"text": fmt.Sprintf("You asked: %s (%v)", b["query"], b["n"])}})
	}))
	defer app.Close()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "promptfooconfig.yaml", `prompts: ['Question: {{q}}']
providers:
  - id: `+app.URL+`/chat
    config:
      method: post
      headers: {Content-Type: application/json, X-Team: qa}
      body: |
        {"query": "{{ prompt }}", "n": "{{ n }}", "model": "tiny"}
      transformResponse: json.reply.text
tests:
  - vars: {q: 'say "hi"', n: 3}
    assert: [{type: contains, value: 'You asked: Question: say "hi" (3)'}]
  - vars: {q: bye, n: 4}
    assert: [{type: contains, value: hello}]
`)
	importAndBatch(t, dir, cfg, "pass                  50.0%  1/2 (pass rate)")
	mu.Lock()
	defer mu.Unlock()
	sort.Slice(bodies, func(i, j int) bool { return fmt.Sprint(bodies[i]["query"]) > fmt.Sprint(bodies[j]["query"]) }) // items run at once
	got, _ := json.Marshal(bodies)
	want := `[{"model":"tiny","n":"3","query":"Question: say \"hi\""},{"model":"tiny","n":"4","query":"Question: bye"}]`
	if string(got) != want {
		t.Errorf("bodies sent %s\nwant %s", got, want)
	}
	if code, show, _ := flowrun(t, "batch", "show", "last", "--store", filepath.Join(dir, "runs.db"), "--item", "line 2"); code != exitOK ||
		!strings.Contains(show, "text: You asked: Question: bye (4)") || !strings.Contains(show, "✗ contains: hello") {
		t.Errorf("batch show --item: exit %d\n%s", code, show)
	}
}
