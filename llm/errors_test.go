package llm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/llmconf"
	"github.com/flowrun/flowrun/runtime"
)

func TestErrorClasses(t *testing.T) {
	cases := []struct {
		name   string
		reply  llmtest.Reply
		model  *llmconf.Model
		class  errclass.Class
		status int
		msg    string // substring; {url} is the endpoint
	}{
		{"401", llmtest.Error(401, "Incorrect API key provided."), nil, errclass.Critical, 401, "401 Unauthorized from {url}: check OPENAI_API_KEY"},
		{"403", llmtest.Error(403, "Project does not have access."), nil, errclass.Critical, 403, "403 Forbidden from {url}: the key in OPENAI_API_KEY may not use model \"gpt-4.1\""},
		{"404", llmtest.Error(404, "The model does not exist."), nil, errclass.Critical, 404, "404 Not Found from {url}: check the model name \"gpt-4.1\" and the endpoint (OPENAI_BASE_URL)"},
		{"400", llmtest.Error(400, "Invalid schema for response_format."), nil, errclass.Critical, 400, "400 Bad Request from {url}: the server rejected the request; check the model config: Invalid schema"},
		{"500", llmtest.Error(500, "The server had an error."), nil, errclass.Server, 500, "500 Internal Server Error from {url}"},
		{"503 plain text", llmtest.Reply{Status: 503, Body: "upstream unavailable"}, nil, errclass.Server, 503, "503 Service Unavailable from {url}"},
		{"429", llmtest.Error(429, "Rate limit reached."), nil, errclass.RateLimit, 429, "429 Too Many Requests from {url}: Rate limit reached."},
		{"408", llmtest.Error(408, "Request timed out."), nil, errclass.Timeout, 408, "408 Request Timeout from {url}"},
		{"malformed JSON body", llmtest.Reply{Body: `{"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, "mess`}, nil, errclass.Server, 200, "malformed response from {url}"},
		{"connection reset", llmtest.Reply{Reset: true}, nil, errclass.Connection, 0, "connection to {url} failed"},
		{"timeout", llmtest.Reply{Delay: 5 * time.Second, Text: "late"}, &llmconf.Model{Name: "slow", Model: "gpt-4.1", Timeout: 30 * time.Millisecond}, errclass.Timeout, 0, "timeout waiting for {url}"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.New(t)
			srv.Push(tc.reply)
			c, _ := testClient(t, srv, func(o *Options) { o.MaxAttempts = 1 })
			m := tc.model
			if m == nil {
				m = model("gpt-4.1")
			}
			resp, err := c.Complete(context.Background(), Request{Model: m, Messages: userSays("hi")})
			if err == nil {
				t.Fatalf("no error; response %+v", resp)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%T is not *llm.Error: %v", err, err)
			}
			if e.Class() != tc.class || errclass.Of(err) != tc.class {
				t.Errorf("class %q, want %q (%v)", e.Class(), tc.class, err)
			}
			if e.Status != tc.status {
				t.Errorf("status %d, want %d", e.Status, tc.status)
			}
			url := srv.URL + "/chat/completions"
			if want := strings.ReplaceAll(tc.msg, "{url}", url); !strings.Contains(err.Error(), want) {
				t.Errorf("message %q\ndoes not contain %q", err.Error(), want)
			}
			if e.Endpoint != url {
				t.Errorf("endpoint %q", e.Endpoint)
			}
			if srv.Calls() != 1 {
				t.Errorf("%d calls, want 1", srv.Calls())
			}
		})
	}
}

func TestConnectionRefused(t *testing.T) {
	srv := llmtest.New(t)
	c, _ := testClient(t, srv, func(o *Options) { o.MaxAttempts = 2 })
	srv.Close()
	_, err := c.Complete(context.Background(), Request{Model: model("gpt-4.1"), Messages: userSays("hi")})
	if errclass.Of(err) != errclass.Connection {
		t.Fatalf("class %q: %v", errclass.Of(err), err)
	}
}

func TestCriticalIsNotRetried(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404} {
		srv := llmtest.New(t)
		srv.Push(llmtest.Error(status, "no"), llmtest.Text("unreachable"))
		c, s := testClient(t, srv)
		_, err := c.Complete(context.Background(), Request{Model: model("gpt-4.1"), Messages: userSays("hi")})
		if errclass.Of(err) != errclass.Critical || srv.Calls() != 1 || len(s.waits()) != 0 {
			t.Errorf("%d: class %q, %d calls, waits %v", status, errclass.Of(err), srv.Calls(), s.waits())
		}
	}
}

func TestRecoverableIsRetried(t *testing.T) {
	cases := []struct {
		name      string
		first     llmtest.Reply
		wantWaits []time.Duration // nil: check backoff bounds instead
	}{
		{"500 then success", llmtest.Error(500, "boom"), nil},
		{"connection reset then success", llmtest.Reply{Reset: true}, nil},
		{"truncated body then success", llmtest.Reply{Body: `{"id":"x","choices":[`}, nil},
		{"429 Retry-After seconds", llmtest.RateLimited("Retry-After", "7"), []time.Duration{7 * time.Second}},
		{"429 Retry-After fraction", llmtest.RateLimited("Retry-After", "0.25"), []time.Duration{250 * time.Millisecond}},
		{"429 retry-after-ms", llmtest.RateLimited("retry-after-ms", "1500"), []time.Duration{1500 * time.Millisecond}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.New(t)
			srv.Push(tc.first, llmtest.Text("ok"))
			c, s := testClient(t, srv)
			var obs observed
			resp, err := c.Complete(context.Background(), Request{Model: model("gpt-4.1"), Messages: userSays("hi"), Observe: obs.observe})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != "ok" || srv.Calls() != 2 {
				t.Errorf("text %q after %d calls", resp.Text, srv.Calls())
			}
			waits := s.waits()
			if tc.wantWaits != nil {
				if len(waits) != 1 || waits[0] != tc.wantWaits[0] {
					t.Errorf("waits %v, want %v", waits, tc.wantWaits)
				}
			} else if len(waits) != 1 || waits[0] < time.Millisecond/2 || waits[0] > time.Millisecond {
				t.Errorf("waits %v, want one in [0.5ms, 1ms]", waits)
			}
			x := obs.all()
			if len(x) != 2 || x[0].Err == nil || x[0].Try != 1 || x[0].Wait != waits[0] || x[1].Reply == nil || x[1].Try != 2 {
				t.Errorf("observed exchanges %+v", x)
			}
		})
	}
}

func TestRateLimitStorm(t *testing.T) {
	srv := llmtest.New(t)
	for range 6 {
		srv.Push(llmtest.Error(429, "slow down"))
	}
	srv.Push(llmtest.Text("finally"))
	c, s := testClient(t, srv, func(o *Options) { o.MaxAttempts = 10 })
	resp, err := c.Complete(context.Background(), Request{Model: model("gpt-4.1"), Messages: userSays("hi")})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "finally" || srv.Calls() != 7 {
		t.Fatalf("text %q after %d calls", resp.Text, srv.Calls())
	}
	waits := s.waits()
	if len(waits) != 6 {
		t.Fatalf("waits %v", waits)
	}
	// Base 1ms doubling, capped at 8ms; each wait is in [d/2, d].
	for i, w := range waits {
		d := min(time.Millisecond<<i, 8*time.Millisecond)
		if w < d/2 || w > d {
			t.Errorf("wait %d = %v, want within [%v, %v]", i+1, w, d/2, d)
		}
	}
}

func TestStormOutlastsAttempts(t *testing.T) {
	srv := llmtest.New(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Error(503, "overloaded") })
	c, s := testClient(t, srv, func(o *Options) { o.MaxAttempts = 3 })
	_, err := c.Complete(context.Background(), Request{Model: model("gpt-4.1"), Messages: userSays("hi")})
	if errclass.Of(err) != errclass.Server || srv.Calls() != 3 || len(s.waits()) != 2 {
		t.Errorf("class %q after %d calls, waits %v", errclass.Of(err), srv.Calls(), s.waits())
	}
}

func TestRetryAfterTooLong(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.RateLimited("Retry-After", "600"))
	c, s := testClient(t, srv)
	_, err := c.Complete(context.Background(), Request{Model: model("gpt-4.1"), Messages: userSays("hi")})
	var e *Error
	if !errors.As(err, &e) || e.Class() != errclass.RateLimit || e.RetryAfter != 10*time.Minute {
		t.Fatalf("error %#v", err)
	}
	if srv.Calls() != 1 || len(s.waits()) != 0 {
		t.Errorf("%d calls, waits %v: a 10 minute Retry-After should be handed back, not slept", srv.Calls(), s.waits())
	}
}

func TestRetryAfterHeader(t *testing.T) {
	now := time.Date(2025, 8, 20, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		header http.Header
		want   time.Duration
	}{
		{http.Header{"Retry-After": {"3"}}, 3 * time.Second},
		{http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond},
		{http.Header{"Retry-After": {now.Add(20 * time.Second).Format(http.TimeFormat)}}, 20 * time.Second},
		{http.Header{"Retry-After": {now.Add(-time.Hour).Format(http.TimeFormat)}}, 0},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"9"}}, 250 * time.Millisecond},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{}, 0},
	}
	for _, tc := range cases {
		if got := retryAfter(tc.header, now); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.header, got, tc.want)
		}
	}
}

func TestCallerDeadline(t *testing.T) {
	srv := llmtest.New(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Delay: 10 * time.Second} })
	c, s := testClient(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := c.Complete(ctx, Request{Model: model("gpt-4.1"), Messages: userSays("hi")})
	if errclass.Of(err) != errclass.Timeout || srv.Calls() != 1 || len(s.waits()) != 0 {
		t.Errorf("class %q after %d calls, waits %v: %v", errclass.Of(err), srv.Calls(), s.waits(), err)
	}
}

func TestConfigErrors(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	cases := []struct {
		name  string
		model *llmconf.Model
		want  []string
	}{
		{"no key, no endpoint", model("gpt-4.1"), []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", DefaultBaseURL}},
		{"api_key_env unset", &llmconf.Model{Name: "m", Model: "x", BaseURL: "http://127.0.0.1:9/v1", APIKeyEnv: "MY_KEY"}, []string{"MY_KEY", "not set"}},
		{"bad base_url", &llmconf.Model{Name: "m", Model: "x", BaseURL: "localhost:8080"}, []string{"base_url", "not an http(s) URL"}},
		{"unknown api", &llmconf.Model{Name: "m", Model: "x", API: "assistants"}, []string{`api "assistants"`}},
		{"no model name", &llmconf.Model{Name: "m"}, []string{"no model name"}},
	}
	c := New(Options{Env: none})
	for _, tc := range cases {
		_, err := c.Complete(context.Background(), Request{Model: tc.model, Messages: userSays("hi")})
		if errclass.Of(err) != errclass.Critical {
			t.Errorf("%s: class %q: %v", tc.name, errclass.Of(err), err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not mention %q", tc.name, err, w)
			}
		}
	}
}

func TestRuntimeSeesTheClass(t *testing.T) {
	// The runtime routes retry_on by the class a model call's error names.
	err := fmt.Errorf("node: %w", &Error{class: errclass.RateLimit, msg: "x"})
	if runtime.ClassOf(err) != errclass.RateLimit {
		t.Errorf("runtime.ClassOf = %q", runtime.ClassOf(err))
	}
}
