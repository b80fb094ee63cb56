package llm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	neturl "net/url"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/redact"
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
	// final: not sent again whatever its class says, as sending it again
	// would pay again for what failed (a reply cut at max_reply_bytes).
	final bool
	msg   string
	err   error
}

func (e *Error) Error() string { return e.msg }

// Class is the failure's class: rate_limit, server, timeout, connection,
// invalid_output or critical.
func (e *Error) Class() errclass.Class { return e.class }

func (e *Error) Unwrap() error { return e.err }

// RetriesSpent reports whether the client already retried this error as
// its retry policy allows (every recoverable class), or sent it once for
// good (a reply cut at max_reply_bytes): the runtime does not run the node
// again for it, so that a node's retry: and the client's retries never
// multiply.
func (e *Error) RetriesSpent() bool { return Retryable(e.class) }

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
	var rerr *replyError
	var big *replyTooLarge
	switch {
	case errors.As(err, &big), errors.Is(err, bufio.ErrTooLong):
		// Before the status: an error body can be cut too. openai-go's
		// stream decoder cuts a line itself past 32 MiB when a stream
		// comes labelled as JSON, which the line limit leaves alone.
		if big == nil {
			big = &replyTooLarge{limit: ep.limit, line: true}
		}
		e.class, e.final = errclass.Server, true
		e.msg = big.message(url)
	case e.Status >= 400:
		if res != nil {
			e.RetryAfter = retryAfter(res.Header, time.Now())
		}
		se := serverError{status: e.Status}
		if apiErr != nil {
			se.code, se.message = apiErr.Code, apiErr.Message
		}
		if se.message == "" && res != nil {
			se.message = bodyText(res)
		}
		head := fmt.Sprintf("%d %s from %s", e.Status, http.StatusText(e.Status), url)
		e.class, e.msg = describe(se.equivalentStatus(), head, se.message, ep, model)
	case asReplyError(err, &rerr):
		// What the server sent may echo the request: only the parts read
		// out of it go on.
		e.err = nil
		where := "in its reply"
		if rerr.streamed {
			where = "mid-stream"
		}
		head := fmt.Sprintf("%s reported an error %s", url, where)
		if rerr.code != "" {
			head += " (" + rerr.code + ")"
		}
		status := rerr.equivalentStatus()
		if status == 0 {
			// Nothing says what went wrong: the server's fault, worth a retry.
			e.class, e.msg = errclass.Server, head+": "+redact.Line(rerr.message, 300)
			break
		}
		e.class, e.msg = describe(status, head, rerr.message, ep, model)
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
	e.msg = redact.String(e.msg)
	return e
}

// bodyText is what an error response's body says when it is not an
// OpenAI error object: plain text, HTML (its text), or other JSON as it is.
// Redacted here, in its encoded form, before anything cuts it, the read
// cap included.
func bodyText(res *http.Response) string {
	if res.Body == nil {
		return ""
	}
	text, _, _ := redact.Read(res.Body, maxErrorBody)
	if looksLikeHTML(res.Header.Get("Content-Type"), text) {
		text = htmlHidden.ReplaceAllString(text, " ")
		text = htmlTag.ReplaceAllString(text, " ")
		text = html.UnescapeString(text)
	}
	return redact.String(strings.TrimSpace(text))
}

// maxErrorBody is how much of an error response's body is read.
const maxErrorBody = 64 << 10

var (
	htmlHidden = regexp.MustCompile(`(?is)<(script|style)\b.*?</(script|style)\s*>|<!--.*?-->`)
	htmlTag    = regexp.MustCompile(`(?s)<[^>]*>`)
)

func looksLikeHTML(contentType, text string) bool {
	if strings.Contains(strings.ToLower(contentType), "html") {
		return true
	}
	t := strings.ToLower(strings.TrimSpace(text))
	return strings.HasPrefix(t, "<!doctype html") || strings.HasPrefix(t, "<html")
}

// describe classes an error by the HTTP status it has or stands for, and
// says what to check. head says where it came from; detail is the
// server's own message.
func describe(status int, head, detail string, ep *endpoint, model string) (class errclass.Class, msg string) {
	if detail != "" {
		detail = ": " + redact.Line(detail, 300)
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
	case status == http.StatusPaymentRequired:
		return errclass.Critical, head + ": the account is out of quota; check its plan and billing" + detail
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

// serverError is what a server said about an error: the code and type of
// an OpenAI-style error object, its message, and the HTTP status it came
// with or carried (0 if none).
type serverError struct {
	code, typ, message string
	status             int
}

// equivalentStatus is the HTTP status the error stands for, so that it is
// classed as that status would be: the code says most (a 429 whose code
// is insufficient_quota will not pass by waiting), then the status, then
// the type. 0 when nothing is known.
func (se serverError) equivalentStatus() int {
	if s := statusOfName(se.code); s != 0 {
		return s
	}
	if se.status != 0 {
		return se.status
	}
	return statusOfName(se.typ)
}

// statusOfName maps an error code or type that OpenAI or a compatible
// server uses to the HTTP status it stands for; quota errors stand for
// 402. 0 when unknown.
func statusOfName(name string) int {
	switch strings.ToLower(name) {
	case "invalid_api_key", "authentication_error", "authentication", "invalid_authentication", "unauthorized", "incorrect_api_key":
		return http.StatusUnauthorized
	case "insufficient_quota", "quota_exceeded", "billing_hard_limit_reached", "billing_not_active", "payment_required":
		return http.StatusPaymentRequired
	case "permission_denied", "permission_error", "insufficient_permissions", "forbidden", "unsupported_country_region_territory":
		return http.StatusForbidden
	case "model_not_found", "not_found", "not_found_error":
		return http.StatusNotFound
	case "rate_limit_exceeded", "rate_limit_error", "rate_limited", "too_many_requests", "requests", "tokens":
		return http.StatusTooManyRequests
	case "timeout", "request_timeout":
		return http.StatusRequestTimeout
	case "server_error", "internal_error", "internal_server_error", "api_error", "service_unavailable",
		"overloaded", "overloaded_error", "engine_overloaded", "bad_gateway":
		return http.StatusInternalServerError
	case "context_length_exceeded", "invalid_request_error", "invalid_request", "invalid_prompt", "invalid_value",
		"invalid_type", "unsupported_value", "unsupported_parameter", "string_above_max_length", "content_policy_violation":
		return http.StatusBadRequest
	}
	if n, err := strconv.Atoi(name); err == nil && n >= 400 && n < 600 {
		return n
	}
	return 0
}

// replyError is an error a server reported with a 200: inside an event
// stream, or as the body of a reply.
type replyError struct {
	serverError
	streamed bool
}

func (e *replyError) Error() string {
	return strings.TrimSpace(e.code + " " + e.message)
}

// asReplyError finds a replyError in err's chain, or makes one of an
// error event openai-go's stream decoder stopped at.
func asReplyError(err error, target **replyError) bool {
	if errors.As(err, target) {
		return true
	}
	var sseErr *ssestream.StreamError
	if !errors.As(err, &sseErr) {
		return false
	}
	*target = &replyError{serverError: readServerError([]byte(sseErr.Event.Data)), streamed: true}
	if (*target).message == "" && (*target).code == "" {
		(*target).message = sseErr.Message
	}
	return true
}

// bodyError is the error a 200 reply's body reports instead of an
// answer, nil when it reports none.
func bodyError(body string) error {
	var doc struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal([]byte(body), &doc) != nil || len(doc.Error) == 0 || string(doc.Error) == "null" {
		return nil
	}
	return &replyError{serverError: readServerError([]byte(body))}
}

// readServerError reads an OpenAI-style error: {"error": {"code", "type",
// "message", "status"}}, the object alone, or {"error": "text"} with an
// optional "message" and "status" beside it.
func readServerError(data []byte) serverError {
	var doc map[string]json.RawMessage
	if json.Unmarshal(data, &doc) != nil {
		return serverError{message: string(data)}
	}
	if inner, ok := doc["error"]; ok {
		var obj map[string]json.RawMessage
		if json.Unmarshal(inner, &obj) == nil {
			doc = obj
		} else {
			// Express-style servers (mock-llm) put the details beside it:
			// {"error": "Name", "message": "...", "status": 500}.
			se := serverError{message: scalar(inner)}
			if m := scalar(doc["message"]); m != "" {
				se.message = strings.TrimPrefix(se.message+": "+m, ": ")
			}
			se.status, _ = strconv.Atoi(scalar(doc["status"]))
			return se
		}
	}
	se := serverError{code: scalar(doc["code"]), typ: scalar(doc["type"]), message: scalar(doc["message"])}
	se.status, _ = strconv.Atoi(scalar(doc["status"]))
	return se
}

// scalar is a JSON string's text, or a number's digits; "" otherwise.
func scalar(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
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
