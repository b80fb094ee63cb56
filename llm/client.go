package llm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/flowrun/flowrun/budget"
	"github.com/flowrun/flowrun/clock"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/redact"
)

// DefaultMaxAttempts is how many times a model turn is sent, when no
// retry policy says otherwise, before a recoverable error is returned.
const DefaultMaxAttempts = 5

// Options configure a Client. The zero value is ready for production use.
type Options struct {
	// Env looks up environment variables; default os.LookupEnv.
	Env func(name string) (string, bool)
	// HTTPClient sends the requests; default a client with a connection
	// pool sized for many concurrent calls.
	HTTPClient *http.Client
	// MaxAttempts is how many times one model turn is sent before a
	// recoverable error (rate_limit, server, timeout, connection) is
	// returned, unless the model's or the node's retry policy says;
	// default DefaultMaxAttempts. 1 disables retries.
	MaxAttempts int
	// BaseBackoff is the first retry's wait, doubled for each further
	// retry (with jitter) up to MaxBackoff; defaults 500ms and 30s.
	BaseBackoff time.Duration
	MaxBackoff  time.Duration
	// MaxRetryAfter is the longest server-requested wait (Retry-After,
	// retry-after-ms) the client sleeps through; a longer one is returned
	// as the error's RetryAfter instead. Default 2 minutes.
	MaxRetryAfter time.Duration
	// Timeout bounds one HTTP exchange when the model config sets no
	// timeout; default 10 minutes.
	Timeout time.Duration
	// Now and Sleep are the clock of the rate limiters and the backoff;
	// tests pass fakes. Sleep must return ctx.Err() when ctx ends first.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	// Shared, when set, is a rate budget shared with other processes.
	Shared SharedLimits
	// Record, when set, receives every exchange.
	Record *Cassette
	// Replay, when set, answers every request; the network is never used
	// and no key is needed.
	Replay *Cassette
	// Respond, when set and Replay is not, answers every request in
	// place of an endpoint (see Responder).
	Respond Responder
	// Cache, when set, answers repeated requests whose cache setting
	// allows it (see Request.Cache) with no network and no cost, and
	// keeps every reply to such a request. CacheDefault is the setting for
	// requests whose node and model set none (--cache: CacheOn); entries
	// older than CacheTTL (0: no limit) are misses, replaced by the reply.
	Cache        ReplyCache
	CacheDefault string
	CacheTTL     time.Duration
}

// Client sends Requests. It is safe for concurrent use, and its rate
// limiters are shared by every caller: create one per process.
type Client struct {
	opts   Options
	env    func(string) (string, bool)
	http   *http.Client
	clock  clock.Clock
	limits *limiters

	mu        sync.Mutex
	endpoints map[string]*endpoint
	inFlight  requestLocks
}

// New returns a Client.
func New(opts Options) *Client {
	c := &Client{opts: opts, env: opts.Env, http: opts.HTTPClient, endpoints: map[string]*endpoint{}}
	if c.env == nil {
		c.env = os.LookupEnv
	}
	if c.http == nil {
		c.http = defaultHTTPClient()
	}
	if c.opts.MaxAttempts <= 0 {
		c.opts.MaxAttempts = DefaultMaxAttempts
	}
	if c.opts.BaseBackoff <= 0 {
		c.opts.BaseBackoff = 500 * time.Millisecond
	}
	if c.opts.MaxBackoff <= 0 {
		c.opts.MaxBackoff = 30 * time.Second
	}
	if c.opts.MaxRetryAfter <= 0 {
		c.opts.MaxRetryAfter = 2 * time.Minute
	}
	if c.opts.Timeout <= 0 {
		c.opts.Timeout = 10 * time.Minute
	}
	c.clock = clock.Real{}
	if opts.Now != nil || opts.Sleep != nil {
		c.clock = funcClock{now: opts.Now, sleep: opts.Sleep}
	}
	c.limits = &limiters{clock: c.clock, shared: opts.Shared, byKey: map[string]*limiter{}}
	return c
}

// Cassettes are the cassettes the client records into and replays from
// (nil when not set): MCP tool calls are recorded beside model exchanges.
func (c *Client) Cassettes() (record, replay *Cassette) { return c.opts.Record, c.opts.Replay }

// Complete sends req and returns the model's answer. On error the
// Response is still returned when tokens were spent (an invalid_output
// failure after repair turns, or a turn failing after earlier ones), so
// that usage and cost can be accounted.
func (c *Client) Complete(ctx context.Context, req Request) (*Response, error) {
	var schema map[string]any
	if req.OutputSchema != nil {
		schema = strictSchema(req.OutputSchema)
	}
	cl, err := newCall(&req, req.Messages, schema)
	if err != nil {
		return nil, err
	}
	var ep *endpoint
	switch {
	case c.opts.Replay != nil:
	case c.opts.Respond != nil && !req.Model.Offline():
		ep = responderEndpoint
	default:
		if ep, err = c.endpointFor(req.Model); err != nil {
			return nil, err
		}
	}
	if req.Model.Background && req.InFlight == nil {
		req.InFlight = &memoryInFlight{}
	}
	resp := &Response{Cached: true}
	messages := req.Messages
	for turn := 1; ; turn++ {
		if turn > 1 {
			if cl, err = newCall(&req, messages, schema); err != nil {
				return resp, err
			}
		}
		rep, err := c.turn(ctx, &req, ep, cl, turn)
		if err != nil {
			if resp.Turns == 0 {
				return nil, err
			}
			return resp, err
		}
		resp.Turns = turn
		resp.Cached = resp.Cached && rep.cached
		resp.Text = rep.Text
		resp.ToolCalls = parseToolCalls(rep.ToolCalls)
		resp.FinishReason = rep.FinishReason
		resp.Model = rep.Model
		resp.Usage = resp.Usage.Add(rep.Usage)
		resp.CostUSD = figures.RoundUSD(resp.CostUSD + cost(rep.Usage, req.Model, rep.Model))
		if schema == nil || len(rep.ToolCalls) > 0 {
			return resp, nil
		}
		v, problem := parseStructured(rep.Text, schema)
		if problem == nil {
			resp.JSON = v
			return resp, nil
		}
		if turn > req.RepairRetries {
			return resp, &Error{class: errclass.InvalidOutput, Endpoint: c.where(ep, cl), msg: redact.String(invalidOutputMessage(&req, turn, problem, rep.Text))}
		}
		messages = append(append([]Message(nil), messages...),
			Message{Role: RoleAssistant, Text: rep.Text},
			Message{Role: RoleUser, Text: repairPrompt(problem)})
	}
}

func invalidOutputMessage(req *Request, turns int, problem error, text string) string {
	repairs := "no repair_retries"
	if req.RepairRetries > 0 {
		repairs = fmt.Sprintf("%d repair turn(s)", turns-1)
	}
	return fmt.Sprintf("invalid structured output from model %q after %s: %v (reply: %s)",
		req.Model.Model, repairs, problem, showText(text))
}

func showText(s string) string {
	if s == "" {
		return "empty"
	}
	return fmt.Sprintf("%q", redact.Line(s, 200))
}

// turn gets one reply for cl: from the cassette, or over HTTP with
// retries.
func (c *Client) turn(ctx context.Context, req *Request, ep *endpoint, cl *call, turn int) (*reply, error) {
	hash := cl.hash()
	observe := func(x Exchange) {
		if req.Observe != nil {
			x.Key, x.Turn = req.Key, turn
			req.Observe(x)
		}
	}
	if cas := c.opts.Replay; cas != nil {
		_, held, err := c.reserve(ctx, req, ep, cl)
		if err != nil {
			observe(Exchange{Try: 1, Endpoint: "cassette", Err: err, Class: err.class})
			return nil, err
		}
		rep, err := cas.replay(req.Key, hash, cl)
		if err != nil {
			settle(held, 0, false, err)
			observe(Exchange{Try: 1, Endpoint: "cassette", Err: err, Class: err.class})
			return nil, err
		}
		single := c.single(rep, req)
		settle(held, single.CostUSD, true, nil)
		observe(Exchange{Try: 1, Endpoint: "cassette", Reply: single})
		if req.OnDelta != nil && rep.Text != "" {
			req.OnDelta(rep.Text)
		}
		return rep, nil
	}

	cache := c.cacheable(req, cl)
	if cache {
		unlock, lockErr := c.inFlight.lock(ctx, ep.URL+" "+hash)
		if lockErr != nil {
			return nil, c.ended(ctx, ep, cl, &Error{})
		}
		defer unlock()
		rep, err := c.cached(ctx, ep, hash)
		if err != nil {
			observe(Exchange{Try: 1, Endpoint: c.where(ep, cl), Err: err, Class: err.class})
			return nil, err
		}
		if rep != nil {
			rep.Usage, rep.cached = Usage{}, true
			hit := c.single(rep, req)
			hit.Cached = true
			observe(Exchange{Try: 1, Endpoint: c.where(ep, cl), Reply: hit, Cached: true})
			if req.OnDelta != nil && rep.Text != "" {
				req.OnDelta(rep.Text)
			}
			return rep, nil
		}
	}

	lim := c.limits.get(ep.URL+" "+cl.Model, RateLimits{RPM: req.Model.RPM, TPM: req.Model.TPM, MaxConcurrency: req.Model.MaxConcurrency})
	pol := c.policy(req)
	for try := 1; ; try++ {
		began := c.clock.Now()
		rep, charged, err := c.send(ctx, ep, cl, lim, req, turn)
		latency := c.clock.Now().Sub(began)
		if err == nil {
			single := c.single(rep, req)
			observe(Exchange{Try: try, Endpoint: c.where(ep, cl), Latency: latency, Reply: single})
			if cas := c.opts.Record; cas != nil {
				cas.record(req.Key, hash, cl, rep, single.CostUSD, nil)
			}
			if cache {
				c.putCached(ctx, ep, hash, rep)
			}
			return rep, nil
		}
		if ctx.Err() != nil {
			// The caller gave up (node timeout, run stopped): not retried,
			// not recorded.
			err = c.ended(ctx, ep, cl, err)
			observe(Exchange{Try: try, Endpoint: c.where(ep, cl), Latency: latency, Err: err, Class: err.class, Charged: charged})
			return nil, err
		}
		retry := pol.retries(err) && try < pol.attempts && err.RetryAfter <= c.opts.MaxRetryAfter
		var wait time.Duration
		if retry {
			wait = pol.backoff(try, err.RetryAfter)
		}
		observe(Exchange{Try: try, Endpoint: c.where(ep, cl), Latency: latency, Err: err, Class: err.class, Wait: wait, Charged: charged})
		if !retry {
			if cas := c.opts.Record; cas != nil && !errors.As(err, new(*budget.ExceededError)) {
				cas.record(req.Key, hash, cl, nil, 0, err)
			}
			return nil, err
		}
		if c.clock.Sleep(ctx, wait) != nil {
			return nil, c.ended(ctx, ep, cl, err)
		}
	}
}

// send makes one HTTP exchange under the rate limiter. Failed, it
// returns what the exchange counts at (see settle).
func (c *Client) send(ctx context.Context, ep *endpoint, cl *call, lim *limiter, req *Request, turn int) (*reply, float64, *Error) {
	release, err := lim.acquire(ctx, cl.estimateTokens())
	if err != nil {
		return nil, 0, &Error{class: errclass.Timeout, Endpoint: c.where(ep, cl), msg: "waiting for the rate limiter: " + err.Error(), err: err}
	}
	cl, held, refused := c.reserve(ctx, req, ep, cl)
	if refused != nil {
		release(0)
		return nil, 0, refused
	}
	rep, failed := c.exchange(ctx, ep, cl, req, turn, release)
	if rep != nil {
		settle(held, cost(rep.Usage, req.Model, rep.Model), true, nil)
		return rep, 0, nil
	}
	return nil, settle(held, 0, false, failed), failed
}

// exchange sends cl once, reserved and admitted by the rate limiter,
// whose release it calls with the tokens used.
func (c *Client) exchange(ctx context.Context, ep *endpoint, cl *call, req *Request, turn int, release func(int)) (*reply, *Error) {
	var err error
	timeout := c.opts.Timeout
	if req.Model.Timeout > 0 {
		timeout = req.Model.Timeout
	}
	ctx = context.WithValue(ctx, keyInContext{}, req.Key)
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if c.opts.Respond != nil {
		if rep, e, answered := c.respond(actx, req, release); answered {
			return rep, e
		}
	}
	var res *http.Response
	var rep *reply
	var onDelta func(string) // nil: a plain request
	if Streams(req) {
		onDelta = req.OnDelta
		if onDelta == nil {
			onDelta = func(string) {}
		}
	}
	path := chatPath
	background := cl.API == APIResponses && req.Model.Background
	switch {
	case req.Model.Offline():
		var e *Error
		if rep, e = offlineReply(ep, cl, req.Model); e != nil {
			release(0)
			return nil, e
		}
		if onDelta != nil && rep.Text != "" {
			onDelta(rep.Text)
		}
	case background:
		path = responsesPath
		rep, err = c.background(ctx, ep, cl, req, turn, timeout, onDelta, &res)
	case cl.API == APIResponses:
		path = responsesPath
		rep, err = sendResponses(actx, ep, cl, onDelta, &res)
	default:
		rep, err = sendChat(actx, ep, cl, onDelta, &res)
	}
	if err != nil {
		release(0)
		e := classify(actx, err, res, ep, cl.Model, path)
		if onDelta != nil && len(cl.Tools) > 0 && e.class == errclass.Server && !e.final {
			// Some OpenAI-compatible servers fail, or drop the calls,
			// when asked to stream tool calls.
			e.msg += fmt.Sprintf("; the request offered tools and was streamed: if this server cannot stream tool calls, set stream: false on model %q", req.Model.Name)
		}
		if background && e.class == errclass.Critical && (e.Status == http.StatusBadRequest || e.Status == http.StatusNotFound || e.Status == http.StatusMethodNotAllowed || e.Status == http.StatusUnprocessableEntity) {
			e.msg += fmt.Sprintf("; model %q has background: true: if this server does not support background responses (created with background: true, then GET /responses/{id}), set background: false", req.Model.Name)
		}
		return nil, e
	}
	if rep.Usage.Prompt == 0 && rep.Usage.Total == 0 {
		if rep.Usage, err = estimateUsage(cl, rep); err != nil {
			release(0)
			return nil, &Error{class: errclass.Critical, Endpoint: c.where(ep, cl), msg: "counting the tokens of a reply that reported no usage: " + err.Error(), err: err}
		}
	}
	release(rep.Usage.Total)
	if onDelta == nil && req.OnDelta != nil && rep.Text != "" {
		req.OnDelta(rep.Text)
	}
	return rep, nil
}

// Streams reports whether req is sent as a streamed request. The model's
// stream: true or false decides; auto (the default) streams when someone
// watches the text arrive (OnDelta is set: flowrun's live view on a
// terminal) or when the node's timeout is shorter than the reply is
// expected to take (ExpectedReply).
func Streams(req *Request) bool {
	switch req.Model.Stream {
	case "true":
		return true
	case "false":
		return false
	}
	return req.OnDelta != nil || (req.Timeout > 0 && req.Timeout < ExpectedReply(req))
}

// ExpectedReply is how long a reply is assumed to take for stream: auto:
// its token budget (the node's or model's max_tokens, else 4096) at 50
// tokens a second.
func ExpectedReply(req *Request) time.Duration {
	tokens := cmp.Or(req.MaxTokens, req.Model.MaxTokens, 4096)
	return time.Duration(tokens) * time.Second / 50
}

// ended is the error for a call whose context ended.
func (c *Client) ended(ctx context.Context, ep *endpoint, cl *call, last *Error) *Error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &Error{class: errclass.Timeout, Endpoint: c.where(ep, cl), msg: "timeout: the deadline passed while calling " + c.where(ep, cl), err: ctx.Err()}
	}
	// Cancelled: the run is stopping, so nothing to retry.
	return &Error{class: errclass.Cancelled, Status: last.Status, Endpoint: last.Endpoint, msg: "cancelled while calling " + c.where(ep, cl), err: ctx.Err()}
}

// retryPolicy is how one model call is retried: the client's defaults,
// then the model's retry:, then the node's retry:, each replacing what it
// sets.
type retryPolicy struct {
	attempts            int
	backoffBase, maxCap time.Duration
	jitter              float64
	on                  []errclass.Class // nil: every recoverable class
}

func (c *Client) policy(req *Request) retryPolicy {
	p := retryPolicy{attempts: c.opts.MaxAttempts, backoffBase: c.opts.BaseBackoff, maxCap: c.opts.MaxBackoff, jitter: 0.5}
	if r := req.Model.Retry; r != nil {
		if r.MaxAttempts > 0 {
			p.attempts = r.MaxAttempts
		}
		if r.Backoff > 0 {
			p.backoffBase = r.Backoff
		}
		if r.MaxBackoff > 0 {
			p.maxCap = r.MaxBackoff
		}
		if r.Jitter != nil {
			p.jitter = *r.Jitter
		}
	}
	if r := req.Retry; r != nil {
		p.attempts = max(r.MaxAttempts, 1)
		if r.Backoff > 0 {
			p.backoffBase = r.Backoff
		}
		p.on = r.RetryOn
	}
	return p
}

func (p retryPolicy) retries(e *Error) bool {
	return !e.final && Retryable(e.class) && (p.on == nil || slices.Contains(p.on, e.class))
}

// backoff is the wait before retry number try: what the server asked
// for, else backoffBase·2^(try-1) capped at maxCap, of which the jitter
// share is drawn at random.
func (p retryPolicy) backoff(try int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return retryAfter
	}
	d := p.backoffBase
	for i := 1; i < try && d < p.maxCap; i++ {
		d *= 2
	}
	d = min(d, p.maxCap)
	random := time.Duration(float64(d) * p.jitter)
	return d - random + rand.N(random+1)
}

// single is one exchange's reply as a Response, priced.
func (c *Client) single(rep *reply, req *Request) *Response {
	return &Response{
		Text:         rep.Text,
		FinishReason: rep.FinishReason,
		ToolCalls:    parseToolCalls(rep.ToolCalls),
		Usage:        rep.Usage,
		CostUSD:      cost(rep.Usage, req.Model, rep.Model),
		Model:        rep.Model,
		Turns:        1,
	}
}

func (c *Client) where(ep *endpoint, cl *call) string {
	switch {
	case ep == nil:
		return "cassette"
	case ep == responderEndpoint || ep.URLFrom == offlineURLFrom:
		return ep.display
	case cl.API == APIResponses:
		return ep.display + responsesPath
	}
	return ep.display + chatPath
}

type funcClock struct {
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

func (f funcClock) Now() time.Time {
	if f.now == nil {
		return time.Now()
	}
	return f.now()
}

func (f funcClock) Sleep(ctx context.Context, d time.Duration) error {
	if f.sleep == nil {
		return clock.Real{}.Sleep(ctx, d)
	}
	return f.sleep(ctx, d)
}

type keyInContext struct{}

// KeyOf returns the Key of the model call an outgoing HTTP request was made
// for, read from the request's context. A transport given as
// Options.HTTPClient may route by it: flowrun test answers each node from
// its mocks this way, over real HTTP.
func KeyOf(ctx context.Context) (Key, bool) {
	k, ok := ctx.Value(keyInContext{}).(Key)
	return k, ok
}
