package llm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/llm/llmtest"
)

// An HTTP error's body is in the error whatever its shape, redacted before
// it is cut to one line.
func TestHTTPErrorBodyShown(t *testing.T) {
	long := strings.Repeat("padding ", 100)
	cases := []struct {
		name  string
		reply llmtest.Reply
		want  []string
		not   []string
		class errclass.Class
	}{
		{"plain text 500", llmtest.Reply{Status: 500, Body: "upstream model crashed: CUDA out of memory", Header: map[string]string{"Content-Type": "text/plain"}},
			[]string{"500 Internal Server Error from", ": upstream model crashed: CUDA out of memory"}, nil, errclass.Server},
		{"HTML 502", llmtest.Reply{Status: 502, Header: map[string]string{"Content-Type": "text/html"},
			Body: "<html><head><title>502 Bad Gateway</title><style>body{color:red}</style></head>\n<body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx/1.25</center><script>track()</script></body></html>"},
			[]string{"502 Bad Gateway from", ": 502 Bad Gateway 502 Bad Gateway nginx/1.25"}, []string{"<", "color:red", "track"}, errclass.Server},
		{"JSON that is not an OpenAI error", llmtest.Reply{Status: 422, Body: `{"detail": [{"loc": ["body", "messages"], "msg": "field required"}]}`},
			[]string{"422 Unprocessable Entity from", `"msg": "field required"`}, nil, errclass.Critical},
		{"key echoed, then cut", llmtest.Reply{Status: 500, Body: "bad header Authorization: Bearer " + fakeKey + " " + long, Header: map[string]string{"Content-Type": "text/plain"}},
			[]string{"bad header Authorization: Bearer", "…"}, []string{fakeKey, fakeKey[:12], long}, errclass.Server},
	}
	for _, tc := range cases {
		for _, stream := range []string{"true", "false"} {
			srv := llmtest.New(t)
			srv.Push(tc.reply)
			c, _ := testClient(t, srv, func(o *Options) { o.MaxAttempts = 1 })
			m := model("gpt-4.1")
			m.Stream = stream
			_, err := c.Complete(context.Background(), Request{Model: m, Messages: userSays("hi")})
			if errclass.Of(err) != tc.class {
				t.Errorf("%s stream=%s: class %q, want %q: %v", tc.name, stream, errclass.Of(err), tc.class, err)
				continue
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s stream=%s: %q\nlacks %q", tc.name, stream, err, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(err.Error(), n) {
					t.Errorf("%s stream=%s: %q\ncontains %q", tc.name, stream, err, n)
				}
			}
		}
	}
}

// An error sent with a 200 as {"error": "Name", "message": ..., "status": N}
// (what Express-based servers such as mock-llm send, streamed or not) is
// classed by its status and quotes its message.
func TestExpressStyleErrorInReply(t *testing.T) {
	for _, tc := range []struct {
		body  string
		class errclass.Class
		want  string
	}{
		{`{"error": "Internal Server Error", "message": "database is down", "status": 503}`, errclass.Server, "reported an error %s: Internal Server Error: database is down"},
		{`{"error": "Too Many Requests", "message": "slow down", "status": 429}`, errclass.RateLimit, "reported an error %s: Too Many Requests: slow down"},
	} {
		for _, stream := range []string{"true", "false"} {
			srv := llmtest.New(t)
			reply, where := llmtest.Reply{Body: tc.body}, "in its reply"
			if stream == "true" {
				reply, where = llmtest.Reply{Body: "data: " + tc.body + "\n\n", Header: map[string]string{"Content-Type": "text/event-stream"}}, "mid-stream"
			}
			srv.Push(reply)
			c, _ := testClient(t, srv, func(o *Options) { o.MaxAttempts = 1 })
			m := model("gpt-4.1")
			m.Stream = stream
			_, err := c.Complete(context.Background(), Request{Model: m, Messages: userSays("hi")})
			if errclass.Of(err) != tc.class || !strings.Contains(fmt.Sprint(err), fmt.Sprintf(tc.want, where)) {
				t.Errorf("stream=%s %s: class %q, error %v\nwant class %q and %q", stream, tc.body, errclass.Of(err), err, tc.class, fmt.Sprintf(tc.want, where))
			}
		}
	}
}

// An error body is read up to maxErrorBody: a server that pads its body
// so that the echoed key crosses that cut, at every offset, leaves no
// piece of the key (four characters or more) in the error or the cassette.
func TestErrorBodyCutLeavesNoPieceOfTheKey(t *testing.T) {
	srv := llmtest.New(t)
	rec := NewCassette()
	c, _ := testClient(t, srv, func(o *Options) { o.MaxAttempts = 1; o.Record = rec })
	bearer := "Bearer " + fakeKey
	var outputs []string
	for pad := maxErrorBody - len(bearer) - 1; pad <= maxErrorBody+1; pad++ {
		srv.Push(llmtest.Reply{Status: 400, Body: strings.Repeat(" ", pad) + bearer + " is not valid", Header: map[string]string{"Content-Type": "text/plain"}})
		_, err := c.Complete(context.Background(), Request{Key: Key{Node: "n", Iteration: pad, Attempt: 1}, Model: model("gpt-4.1"), Messages: userSays("hi")})
		if err == nil {
			t.Fatalf("pad %d: no error", pad)
		}
		outputs = append(outputs, fmt.Sprintf("pad %d: %v", pad, err))
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := rec.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	file, _ := os.ReadFile(path)
	outputs = append(outputs, string(file))
	sawRedacted := false
	for _, out := range outputs {
		for i := 0; i+4 <= len(fakeKey); i++ {
			if strings.Contains(out, fakeKey[i:i+4]) {
				t.Fatalf("holds %q of the key:\n%.400s", fakeKey[i:i+4], out)
			}
		}
		sawRedacted = sawRedacted || strings.Contains(out, "[redacted]")
	}
	if !sawRedacted {
		t.Fatal("no output shows a redaction: the key never reached the error")
	}
}
