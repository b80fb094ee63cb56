package web

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// A model whose reply has no end fails its own run, once, at the model's
// max_reply_bytes; the server and another person's run go on.
func TestEndlessReplyFailsOnlyItsRun(t *testing.T) {
	h := newHarness(t, "")
	var requests atomic.Int32
	endless := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		llmtest.Flood(w, "application/json", llmtest.ChatPrefix, "a", 256<<20)
	}))
	t.Cleanup(endless.Close)
	pipeline := "version: 1\nname: endless\nmodels:\n  flood: {model: m, base_url: " + endless.URL + "/v1, stream: false, max_reply_bytes: 1048576}\n" +
		"nodes:\n  - id: ask\n    retry: {max_attempts: 3}\n    llm: {model: flood, prompt: hi}\n"
	if err := os.WriteFile(filepath.Join(h.dir, "endless.yaml"), []byte(pipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	h.fake.Push(llmtest.Text("still here"))
	bad := h.start(url.Values{"pipeline": {"endless.yaml"}})
	good := h.start(url.Values{"pipeline": {"chat.yaml"}, "in.topic": {"birds"}, "in.level": {"high"}, "in.count": {"1"}})
	if r := h.await(bad, "failed"); !strings.Contains(r.Error, `model "flood"`) || !strings.Contains(r.Error, "longer than 1 MiB") {
		t.Fatalf("the endless run failed with %q", r.Error)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("%d requests for the endless reply, want 1: a cut reply is sent once, by the client and by the node", n)
	}
	if r := h.await(good, "completed"); r.Outputs["text"] != "still here" {
		t.Fatalf("the other run: outputs %v", r.Outputs)
	}
	if code, _ := h.get("/"); code != http.StatusOK {
		t.Fatalf("the server answers %d", code)
	}
}
