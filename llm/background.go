package llm

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/flowrun/flowrun/llmconf"
)

// InFlight keeps the background responses a call creates where a later
// attempt at the same call finds them: a run resumed after a crash, on
// this machine or another, re-attaches to the response by id instead of
// paying for it again. Turn is the call's turn (1, then one per repair).
type InFlight interface {
	// Lookup returns what Record last kept for turn.
	Lookup(turn int) (BackgroundCall, bool)
	// Record keeps bc for turn, durably when it returns.
	Record(ctx context.Context, turn int, bc BackgroundCall) error
}

// BackgroundCall is a background response as a call last recorded it.
type BackgroundCall struct {
	ID string `json:"id"`
	// Status is queued or in_progress while the response may still be
	// collected; failed or cancelled once a new one must be created.
	Status string `json:"status"`
	// Seq is the sequence number of the last stream event received when
	// it was recorded: a streamed response resumes after it.
	Seq int64 `json:"seq,omitempty"`
}

// ReadBackgroundCall reads a BackgroundCall back from the JSON a record
// of it was kept as; false when raw is not one (an unreadable record
// reads as nothing in flight, so that a new response is created rather
// than the call failing for good).
func ReadBackgroundCall(raw []byte) (BackgroundCall, bool) {
	var bc BackgroundCall
	if json.Unmarshal(raw, &bc) != nil || bc.ID == "" {
		return BackgroundCall{}, false
	}
	return bc, true
}

// BackgroundEvent reports what happened to a background response.
type BackgroundEvent struct {
	Key Key
	// What is created, attached (a resumed call found it), polled,
	// completed (the response ended, whatever its status) or cancelled
	// (flowrun asked the server to cancel it).
	What   string
	ID     string
	Status string // as the server last said
	Polls  int    // polls so far
	// Error, on cancelled, is why the cancel request failed.
	Error string
}

// memoryInFlight is an InFlight kept in memory: where a call is given
// none, its own retries still re-attach to the response it created.
type memoryInFlight struct {
	mu sync.Mutex
	m  map[int]BackgroundCall
}

func (f *memoryInFlight) Lookup(turn int) (BackgroundCall, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	bc, ok := f.m[turn]
	return bc, ok
}

func (f *memoryInFlight) Record(_ context.Context, turn int, bc BackgroundCall) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[int]BackgroundCall{}
	}
	f.m[turn] = bc
	return nil
}

// streamRecordEvery is how often a streamed response's position is
// recorded: each record is a durable write.
const streamRecordEvery = 5 * time.Second

// cancelTimeout bounds the request that cancels a background response:
// it is sent after the call's own context has ended.
const cancelTimeout = 10 * time.Second

// backgroundCall is one turn of a call made as a background response.
type backgroundCall struct {
	c       *Client
	ep      *endpoint
	req     *Request
	turn    int
	timeout time.Duration // of one HTTP exchange
	res     **http.Response

	id       string
	status   string
	seq      int64 // last stream event received; -1 before any
	polls    int
	attached bool // the response was found in flight, not created here
	// positionAt is when the stream's position was last recorded.
	positionAt time.Time
}

// background sends cl as a background response, or re-attaches to the one
// an earlier attempt at the call created, and waits for it to end:
// polling, or reading its stream (resumed after the last event received)
// when onDelta is set. A call whose context ends cancels the response on
// the server.
func (c *Client) background(ctx context.Context, ep *endpoint, cl *call, req *Request, turn int, timeout time.Duration, onDelta func(string), res **http.Response) (*reply, error) {
	b := &backgroundCall{c: c, ep: ep, req: req, turn: turn, timeout: timeout, res: res, seq: -1}
	if req.InFlight != nil {
		if bc, ok := req.InFlight.Lookup(turn); ok && bc.ID != "" && bc.Status != "failed" && bc.Status != "cancelled" {
			b.id, b.status, b.seq, b.attached = bc.ID, bc.Status, bc.Seq, true
			b.tell("attached", "")
		}
	}
	p := responsesParams(cl)
	p.Background = param.NewOpt(true)
	// A background response is kept on the server until collected.
	p.Store = param.NewOpt(true)
	switch {
	case b.id == "" && onDelta != nil:
		return b.read(ctx, ep.responses.NewStreaming(ctx, p, option.WithResponseInto(res)), onDelta)
	case b.id == "":
		actx, cancel := context.WithTimeout(ctx, timeout)
		out, err := ep.responses.New(actx, p, option.WithResponseInto(res))
		cancel()
		if err != nil {
			return nil, err
		}
		if err := b.created(ctx, out.ID, string(out.Status)); err != nil {
			return nil, err
		}
		if ended(out.Status) {
			return b.collect(ctx, out)
		}
	case onDelta != nil:
		return b.resume(ctx, onDelta)
	}
	return b.poll(ctx)
}

// created records a new response before anything else is asked of it.
func (b *backgroundCall) created(ctx context.Context, id, status string) error {
	if id == "" {
		return &replyError{serverError: serverError{message: fmt.Sprintf("the server answered a background request with no response id; if it does not support background responses, set background: false on model %q", b.req.Model.Name)}}
	}
	b.id, b.status, b.positionAt = id, status, b.c.clock.Now()
	if in := b.req.InFlight; in != nil {
		if err := in.Record(ctx, b.turn, BackgroundCall{ID: id, Status: status, Seq: max(b.seq, 0)}); err != nil {
			b.cancel()
			return fmt.Errorf("recording background response %s: %w", id, err)
		}
	}
	b.tell("created", status)
	return nil
}

// poll asks for the response until it ends, the wait growing from the
// model's poll: (default llmconf.DefaultPoll) by half each time up to
// llmconf.MaxPoll.
func (b *backgroundCall) poll(ctx context.Context) (*reply, error) {
	wait := cmp.Or(b.req.Model.Poll, llmconf.DefaultPoll)
	longest := max(wait, llmconf.MaxPoll)
	// A response found in flight (a resumed call) may have ended while
	// nobody polled: asked at once.
	now := b.attached
	for {
		if !now {
			if err := b.c.clock.Sleep(ctx, wait); err != nil {
				b.cancel()
				return nil, err
			}
		}
		now = false
		actx, cancel := context.WithTimeout(ctx, b.timeout)
		out, err := b.ep.responses.Get(actx, b.id, responses.ResponseGetParams{}, option.WithResponseInto(b.res))
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				b.cancel()
				return nil, err
			}
			return nil, err
		}
		b.polls++
		b.status = string(out.Status)
		b.tell("polled", b.status)
		if ended(out.Status) {
			return b.collect(ctx, out)
		}
		wait = min(wait+wait/2, longest)
	}
}

// resume reads the response's stream after the last event received.
func (b *backgroundCall) resume(ctx context.Context, onDelta func(string)) (*reply, error) {
	q := responses.ResponseGetParams{}
	if b.seq > 0 {
		q.StartingAfter = param.NewOpt(b.seq)
	}
	return b.read(ctx, b.ep.responses.GetStreaming(ctx, b.id, q, option.WithResponseInto(b.res)), onDelta)
}

// read reads a background response's stream; a stream that breaks off
// once the response is known is resumed where it stopped, as long as each
// new stream brings at least one event.
func (b *backgroundCall) read(ctx context.Context, stream *ssestream.Stream[responses.ResponseStreamEventUnion], onDelta func(string)) (*reply, error) {
	for {
		before := b.seq
		rep, done, err := b.events(ctx, stream, onDelta)
		stream.Close()
		if done {
			return rep, err
		}
		switch {
		case ctx.Err() != nil:
			if b.id != "" {
				b.cancel()
			}
			return nil, ctx.Err()
		case b.id == "" && err != nil, cutReply(err):
			// A stream cut at its limit is not resumed: the call fails for good.
			return nil, err
		case b.id == "" || b.seq == before:
			return nil, cmp.Or(err, errStreamCut)
		}
		stream = b.ep.responses.GetStreaming(ctx, b.id, responses.ResponseGetParams{StartingAfter: param.NewOpt(b.seq)}, option.WithResponseInto(b.res))
	}
}

// events reads one stream; done says the response ended (rep or err is
// its outcome), else err is why the stream stopped, if known.
func (b *backgroundCall) events(ctx context.Context, stream *ssestream.Stream[responses.ResponseStreamEventUnion], onDelta func(string)) (rep *reply, done bool, err error) {
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber <= b.seq {
			continue // sent again by a server that ignored starting_after
		}
		b.seq = ev.SequenceNumber
		switch ev.Type {
		case "response.created":
			if b.id == "" {
				if err := b.created(ctx, ev.Response.ID, string(ev.Response.Status)); err != nil {
					return nil, true, err
				}
			}
		case "response.output_text.delta":
			onDelta(ev.Delta)
			b.keepPosition(ctx)
		case "response.completed", "response.incomplete", "response.failed", "response.cancelled":
			r := ev.Response
			rep, err := b.collect(ctx, &r)
			return rep, true, err
		case "error":
			b.status = "failed"
			b.tell("completed", b.status)
			b.retire(ctx)
			return nil, true, &replyError{serverError: serverError{code: ev.Code, message: ev.Message}, streamed: true}
		}
	}
	return nil, false, stream.Err()
}

// keepPosition records how far the stream has been read, at most every
// streamRecordEvery, so that a new process resumes the stream near where
// this one stopped. Best effort: the response itself is already recorded.
func (b *backgroundCall) keepPosition(ctx context.Context) {
	now := b.c.clock.Now()
	if b.req.InFlight == nil || now.Sub(b.positionAt) < streamRecordEvery {
		return
	}
	b.positionAt = now
	_ = b.req.InFlight.Record(ctx, b.turn, BackgroundCall{ID: b.id, Status: b.status, Seq: b.seq})
}

// collect is the outcome of a response that ended. A failed or cancelled
// one is recorded as such, so that a retry creates a new response.
func (b *backgroundCall) collect(ctx context.Context, out *responses.Response) (*reply, error) {
	b.status = string(out.Status)
	b.tell("completed", b.status)
	switch out.Status {
	case responses.ResponseStatusCompleted, responses.ResponseStatusIncomplete:
		return responsesReply(out)
	case responses.ResponseStatusFailed:
		b.retire(ctx)
		return responsesReply(out)
	}
	b.retire(ctx)
	return nil, &replyError{serverError: serverError{message: fmt.Sprintf("background response %s ended with status %s", b.id, cmp.Or(b.status, "(none)"))}}
}

// retire records that the response can no longer be collected.
func (b *backgroundCall) retire(ctx context.Context) {
	if in := b.req.InFlight; in != nil {
		if b.status != "failed" {
			b.status = "cancelled"
		}
		// Best effort: if this is lost, a resume re-attaches, finds the
		// response failed again and then creates a new one.
		_ = in.Record(ctx, b.turn, BackgroundCall{ID: b.id, Status: b.status})
	}
}

// cancel asks the server to cancel the response and records that it is
// cancelled. It runs after the call's context ended, so it has one of its
// own.
func (b *backgroundCall) cancel() {
	ctx, stop := context.WithTimeout(context.Background(), cancelTimeout)
	defer stop()
	_, err := b.ep.responses.Cancel(ctx, b.id)
	b.status = "cancelled"
	ev := BackgroundEvent{Key: b.req.Key, What: "cancelled", ID: b.id, Status: b.status, Polls: b.polls}
	if err != nil {
		ev.Error = err.Error()
	}
	if b.req.OnBackground != nil {
		b.req.OnBackground(ev)
	}
	b.retire(ctx)
}

func (b *backgroundCall) tell(what, status string) {
	if b.req.OnBackground != nil {
		b.req.OnBackground(BackgroundEvent{Key: b.req.Key, What: what, ID: b.id, Status: cmp.Or(status, b.status), Polls: b.polls})
	}
}

func ended(status responses.ResponseStatus) bool {
	return status != "" && status != responses.ResponseStatusQueued && status != responses.ResponseStatusInProgress
}
