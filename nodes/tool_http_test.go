package nodes_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
)

// TestHTTPTool: a declared http tool sends its method, URL, headers and
// JSON body filled from the call's arguments to a host on this machine,
// and gives {status, body}; a 4xx or 5xx status fails the node with its
// class and the body's start, never the headers.
func TestHTTPTool(t *testing.T) {
	var got struct {
		method, path, auth, contentType string
		body                            map[string]any
	}
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.method, got.path, got.auth, got.contentType = r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("Content-Type")
		got.body = nil
		_ = json.Unmarshal(b, &got.body)
		w.WriteHeader(status)
		fmt.Fprint(w, `{"reply": "hi there"}`)
	}))
	defer srv.Close()
	t.Setenv("APP_TOKEN", "tok-123456")
	p := load(t, `
version: 1
name: t
env: [APP_TOKEN]
inputs: {question: {type: string}}
tools:
  app:
    description: The application under test.
    parameters: {type: object, properties: {q: {type: string}, n: {type: integer}}, required: [q]}
    http:
      url: `+srv.URL+`/ask?lang=${{ "en" }}
      headers: {Authorization: "Bearer ${{ env.APP_TOKEN }}"}
      body: {query: "Q: ${{ inputs.q }}", n: "${{ inputs.n }}", model: tiny, temperature: 0}
nodes:
  - id: ask
    tool: {name: app, args: {q: inputs.question, n: 3}}
outputs: {reply: fromJSON(nodes.ask.body).reply, status: nodes.ask.status}
`, nil)
	res, _ := run(t, p, nodes.Kinds(nodes.Services{}), map[string]any{"question": `say "hi"`})
	mustComplete(t, res)
	if res.Outputs["reply"] != "hi there" || res.Outputs["status"] != 200 {
		t.Fatalf("outputs %v", res.Outputs)
	}
	want := map[string]any{"query": `Q: say "hi"`, "n": float64(3), "model": "tiny", "temperature": float64(0)}
	if got.method != "POST" || got.path != "/ask?lang=en" || got.auth != "Bearer tok-123456" || got.contentType != "application/json" || fmt.Sprint(got.body) != fmt.Sprint(want) {
		t.Fatalf("request %+v, want POST /ask?lang=en with the token and body %v", got, want)
	}

	for _, c := range []struct {
		status int
		class  errclass.Class
	}{{http.StatusNotFound, errclass.Critical}, {http.StatusTooManyRequests, errclass.RateLimit}, {http.StatusBadGateway, errclass.Server}} {
		status = c.status
		res, _ := run(t, p, nodes.Kinds(nodes.Services{}), map[string]any{"question": "x"})
		if res.Status != runtime.StatusFailed || errclass.Of(res.Err) != c.class ||
			!strings.Contains(res.Err.Error(), fmt.Sprintf(`tool "app": POST %s/ask?lang=en: status %d: {"reply": "hi there"}`, srv.URL, c.status)) ||
			strings.Contains(res.Err.Error(), "tok-123456") {
			t.Errorf("status %d: %s %v (class %s), want class %s", c.status, res.Status, res.Err, errclass.Of(res.Err), c.class)
		}
	}
}
