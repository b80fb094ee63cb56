package llm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	neturl "net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/flowrun/flowrun/errclass"
)

// Error is a failed model call. Its message never contains an API key.
type Error struct {
	class errclass.Class
	// Status is the HTTP status, 0 when there was no response.
	Status int
	// Endpoint is the URL called, with any credentials removed.
	Endpoint string
	// RetryAfter is the wait the server asked for, 0 if it did not.
	RetryAfter time.Duration
	msg        string
	err        error
}

func (e *Error) Error() string { return e.msg }

// Class is the failure's class: rate_limit, server, timeout, connection,
// invalid_output or critical.
func (e *Error) Class() errclass.Class { return e.class }

func (e *Error) Unwrap() error { return e.err }

// Retryable reports whether a call that failed with this class may succeed
// if sent again. An invalid_output is not sent again as it is: the node
// retries it, with the problem told to the model.
func Retryable(class errclass.Class) bool {
	switch class {
	case errclass.RateLimit, errclass.Server, errclass.Timeout, errclass.Connection:
		return true
	}
	return false
}

func criticalf(format string, args ...any) *Error {
	return &Error{class: errclass.Critical, msg: fmt.Sprintf(format, args...)}
}

// classify turns what openai-go returned for one attempt into an *Error.
// res is the HTTP response when one arrived (captured with
// option.WithResponseInto), ctx the attempt's context.
func classify(ctx context.Context, err error, res *http.Response, ep *endpoint, model, path string) *Error {
	url := ep.display + path
	e := &Error{Endpoint: url, err: err}
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		e.Status = apiErr.StatusCode
		// openai.Error holds the request, headers and all: not passed on.
		e.err = nil
	} else if res != nil {
		e.Status = res.StatusCode
	}
	var streamErr *streamError
	var sseErr *ssestream.StreamError
	switch {
	case e.Status >= 400:
		if res != nil {
			e.RetryAfter = retryAfter(res.Header, time.Now())
		}
		detail := ""
		if apiErr != nil {
			detail = apiErr.Message
		}
		e.class, e.msg = statusMessage(e.Status, url, detail, ep, model)
	case errors.As(err, &streamErr), errors.As(err, &sseErr):
		e.class = errclass.Server
		e.msg = fmt.Sprintf("%s reported an error mid-stream: %s", url, oneLine(err.Error(), 300))
	case errors.Is(err, errStreamCut):
		e.class = errclass.Connection
		e.msg = fmt.Sprintf("reading from %s: %v", url, err)
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded), isTimeout(err):
		e.class = errclass.Timeout
		e.msg = fmt.Sprintf("timeout waiting for %s", url)
	case e.Status >= 200 && !isTransport(err):
		// The server answered 2xx with a body that could not be read.
		e.class = errclass.Server
		e.msg = fmt.Sprintf("malformed response from %s: %v", url, err)
	default:
		e.class = errclass.Connection
		cause := err
		var ue *neturl.Error
		if errors.As(err, &ue) {
			cause = ue.Err // its URL is already in the message
		}
		e.msg = fmt.Sprintf("connection to %s failed: %v", url, cause)
	}
	e.msg = ep.redact(e.msg)
	return e
}

func statusMessage(status int, url, detail string, ep *endpoint, model string) (class errclass.Class, msg string) {
	head := fmt.Sprintf("%d %s from %s", status, http.StatusText(status), url)
	if detail != "" {
		detail = ": " + oneLine(detail, 300)
	}
	switch {
	case status == http.StatusTooManyRequests:
		return errclass.RateLimit, head + detail
	case status == http.StatusRequestTimeout:
		return errclass.Timeout, head + detail
	case status == http.StatusConflict || status >= 500:
		return errclass.Server, head + detail
	case status == http.StatusUnauthorized:
		return errclass.Critical, head + ": check " + ep.keyHint() + detail
	case status == http.StatusForbidden:
		who := "the key"
		if ep.KeyEnv != "" {
			who = "the key in " + ep.KeyEnv
		}
		return errclass.Critical, head + ": " + who + " may not use model " + strconv.Quote(model) + " here; check the key and the model" + detail
	case status == http.StatusNotFound:
		return errclass.Critical, head + ": check the model name " + strconv.Quote(model) + " and the endpoint (" + ep.urlHint() + ")" + detail
	default:
		return errclass.Critical, head + ": the server rejected the request; check the model config" + detail
	}
}

// isTransport reports a network-level failure. A 2xx answer that fails
// otherwise (bad JSON, a body cut short) is the server's fault.
func isTransport(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &ne) || errors.As(err, &oe) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, context.DeadlineExceeded)
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// retryAfter reads the wait a server asked for: retry-after-ms
// (milliseconds), else Retry-After in seconds or as an HTTP date.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// oneLine shortens s to at most n runes on one line, for error messages.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
