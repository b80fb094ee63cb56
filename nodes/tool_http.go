package nodes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/redact"
	"github.com/flowrun/flowrun/runtime"
)

// httpTool runs a declared http tool: one request, its URL, headers and
// body filled from the call's arguments. Unlike http_get, whose URL the
// model picks, the host is the pipeline's own (the loader checks it is
// written out) and redirects stay on it, so it may be this machine, where an application under
// evaluation usually listens. As with http_get, a 4xx or 5xx status is
// a result, not an error: the pipeline (or the agent's model) reads it,
// as promptfoo's http provider grades whatever its endpoint answers.
func httpTool(d *dsl.Tool) func(context.Context, *runtime.Scope, callSite, map[string]any) (any, error) {
	h := d.HTTP
	return func(ctx context.Context, s *runtime.Scope, at callSite, args map[string]any) (any, error) {
		ts := s.ToolScope(at.dir, args)
		raw, err := ts.Render(h.URL)
		if err != nil {
			return nil, fmt.Errorf("tool %q: url: %w", d.Name, err)
		}
		u, err := url.Parse(raw)
		if err == nil && u.Scheme+"://"+u.Host != h.Origin {
			err = fmt.Errorf("%s is not on %s, the host the pipeline names", u.Redacted(), h.Origin)
		}
		if err != nil {
			return nil, runtime.Errorf(errclass.Critical, "tool %q: url: %v", d.Name, err)
		}
		var body io.Reader
		isJSON := false
		if h.Body != nil {
			v, err := ts.EvalValue(h.Body)
			if err != nil {
				return nil, fmt.Errorf("tool %q: body: %w", d.Name, err)
			}
			if text, ok := v.(string); ok {
				body = strings.NewReader(text)
			} else {
				b, err := json.Marshal(v)
				if err != nil {
					return nil, runtime.Errorf(errclass.Critical, "tool %q: body: %v", d.Name, err)
				}
				body, isJSON = bytes.NewReader(b), true
			}
		}
		req, err := http.NewRequestWithContext(ctx, h.Method, u.String(), body)
		if err != nil {
			return nil, runtime.Errorf(errclass.Critical, "tool %q: %v", d.Name, err)
		}
		for _, hd := range h.Headers {
			v, err := ts.Render(hd.Value)
			if err != nil {
				return nil, fmt.Errorf("tool %q: header %s: %w", d.Name, hd.Name, err)
			}
			req.Header.Set(hd.Name, v)
		}
		if isJSON && req.Header.Get("Content-Type") == "" {
			req.Header.Set("Content-Type", "application/json")
		}
		client := &http.Client{Timeout: h.Timeout, CheckRedirect: func(r *http.Request, via []*http.Request) error {
			// A redirect stays on the pipeline's host, as the request does.
			if len(via) >= 10 || r.URL.Scheme+"://"+r.URL.Host != h.Origin {
				return fmt.Errorf("redirected to %s, off the tool's host %s", r.URL.Redacted(), u.Host)
			}
			return nil
		}}
		resp, err := client.Do(req)
		if err != nil {
			class := errclass.Connection
			var ue *url.Error
			if errors.As(err, &ue) && ue.Timeout() {
				class = errclass.Timeout
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, runtime.Errorf(class, "tool %q: %s %s: %v", d.Name, h.Method, u.Redacted(), errors.Unwrap(err))
		}
		defer resp.Body.Close()
		text, cut, err := redact.Read(resp.Body, h.MaxBytes)
		if err != nil {
			return nil, runtime.Errorf(errclass.Connection, "tool %q: %s %s: reading the body: %v", d.Name, h.Method, u.Redacted(), err)
		}
		text = strings.ToValidUTF8(text, "\uFFFD")
		out := map[string]any{"status": resp.StatusCode, "body": text}
		if cut {
			out["truncated"] = true
		}
		return out, nil
	}
}
