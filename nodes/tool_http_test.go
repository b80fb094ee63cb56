package nodes_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
)

// TestHTTPTool: a declared http tool sends its method, URL, headers and
// JSON body filled from the call's arguments to a host on this machine,
// and gives {status, body}, a 5xx status too; a redirect off that host
// and no server fail the node, naming the URL and never the headers.
func TestHTTPTool(t *testing.T) {
	var got struct {
		method, path, auth, contentType string
		body                            map[string]any
	}
	status := http.StatusOK
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.method, got.path, got.auth, got.contentType = r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("Content-Type")
		got.body = nil
		_ = json.Unmarshal(b, &got.body)
		if got.body["query"] == "Q: away" {
			http.Redirect(w, r, other.URL, http.StatusFound)
			return
		}
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

	status = http.StatusBadGateway
	res, _ = run(t, p, nodes.Kinds(nodes.Services{}), map[string]any{"question": "x"})
	mustComplete(t, res)
	if res.Outputs["status"] != http.StatusBadGateway || res.Outputs["reply"] != "hi there" {
		t.Fatalf("a 502 is a result: outputs %v", res.Outputs)
	}
	res, _ = run(t, p, nodes.Kinds(nodes.Services{}), map[string]any{"question": "away"})
	if res.Status != runtime.StatusFailed || !strings.Contains(fmt.Sprint(res.Err), "off the tool's host") || elsewhere.Load() != 0 {
		t.Fatalf("a redirect to another host: %s %v, %d requests there", res.Status, res.Err, elsewhere.Load())
	}
	srv.Close()
	res, _ = run(t, p, nodes.Kinds(nodes.Services{}), map[string]any{"question": "x"})
	if res.Status != runtime.StatusFailed || errclass.Of(res.Err) != errclass.Connection ||
		!strings.Contains(res.Err.Error(), fmt.Sprintf(`tool "app": POST %s/ask?lang=en: `, srv.URL)) || strings.Contains(res.Err.Error(), "tok-123456") {
		t.Fatalf("no server: %s %v (class %s)", res.Status, res.Err, errclass.Of(res.Err))
	}
}
