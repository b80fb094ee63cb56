package llm

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/llmconf"
)

// TestHardening07InStreamErrorClass: an error a server reports with a 200
// (inside a chat or Responses stream, or as the body of a reply) is classed
// by its code or type as its HTTP status would be, so that an auth error is
// sent once, not retried as a server error. The fake server counts the
// requests.
func TestHardening07InStreamErrorClass(t *testing.T) {
	const attempts = 3
	cases := []struct {
		code, typ string
		class     errclass.Class
		msg       string // in the error
	}{
		{"invalid_api_key", "invalid_request_error", errclass.Critical, "check OPENAI_API_KEY"},
		{"", "authentication_error", errclass.Critical, "check OPENAI_API_KEY"},
		{"insufficient_quota", "insufficient_quota", errclass.Critical, "out of quota"},
		{"model_not_found", "invalid_request_error", errclass.Critical, `check the model name "gpt-4.1"`},
		{"context_length_exceeded", "invalid_request_error", errclass.Critical, "the server rejected the request"},
		{"rate_limit_exceeded", "requests", errclass.RateLimit, "rate_limit_exceeded"},
		{"server_error", "server_error", errclass.Server, "server_error"},
		{"something_new", "", errclass.Server, "something_new"},
	}
	for _, api := range []string{APIChat, APIResponses} {
		for _, streamed := range []bool{true, false} {
			for _, tc := range cases {
				name := fmt.Sprintf("%s/streamed=%v/%s%s", api, streamed, tc.code, tc.typ)
				t.Run(name, func(t *testing.T) {
					if api == APIResponses && streamed && tc.code == "" {
						t.Skip("a Responses error event carries a code, no type")
					}
					srv := llmtest.New(t)
					srv.Handle(func(llmtest.Request) llmtest.Reply {
						return llmtest.InStream(tc.code, tc.typ, "the server says no")
					})
					c, _ := testClient(t, srv, func(o *Options) { o.MaxAttempts = attempts })
					req := Request{Model: &llmconf.Model{Name: "default", Model: "gpt-4.1", API: api}, Messages: userSays("hi")}
					if streamed {
						req.OnDelta = func(string) {}
					}
					_, err := c.Complete(context.Background(), req)
					if errclass.Of(err) != tc.class {
						t.Fatalf("class %q, want %q: %v", errclass.Of(err), tc.class, err)
					}
					want := 1
					if Retryable(tc.class) {
						want = attempts
					}
					if srv.Calls() != want {
						t.Errorf("%d requests, want %d", srv.Calls(), want)
					}
					if !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), "the server says no") {
						t.Errorf("message %q lacks %q and the server's words", err, tc.msg)
					}
				})
			}
		}
	}
	t.Run("429 whose code is insufficient_quota", func(t *testing.T) {
		srv := llmtest.New(t)
		srv.Handle(func(llmtest.Request) llmtest.Reply {
			return llmtest.Reply{Status: 429, Body: `{"error": {"message": "You exceeded your current quota.", "type": "insufficient_quota", "code": "insufficient_quota"}}`}
		})
		c, _ := testClient(t, srv, func(o *Options) { o.MaxAttempts = attempts })
		_, err := c.Complete(context.Background(), Request{Model: model("gpt-4.1"), Messages: userSays("hi")})
		if errclass.Of(err) != errclass.Critical || srv.Calls() != 1 || !strings.Contains(err.Error(), "429 Too Many Requests") {
			t.Fatalf("class %q after %d requests: %v", errclass.Of(err), srv.Calls(), err)
		}
	})
}
