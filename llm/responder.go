package llm

import (
	"context"
	"errors"

	"github.com/flowrun/flowrun/errclass"
)

// A Responder is a model answered by a function instead of a server:
// flowrun test's mocks. As Options.Respond it answers every call in place
// of an endpoint (no network, no key), and its answers go through the
// client as a server's replies would: a recoverable error is retried
// under the call's policy (waiting on the client's clock), structured
// output is checked and repaired, usage is priced, observed and reserved
// under a cost cap. What belongs to the wire does not apply: streaming,
// background responses, the response cache and counting the tokens of a
// reply that reports none (a Reply without Usage costs nothing).
type Responder interface {
	// Respond answers one turn of the call k names (each retry and repair
	// turn asks again). An error with a Class() errclass.Class fails the
	// turn with that class; any other is critical. An error wrapping
	// ErrNoAnswer leaves the call to the model itself when it is offline
	// (echo, mock), which answers as it would in a run; for any other
	// model it fails the turn as critical.
	Respond(ctx context.Context, k Key) (Reply, error)
}

// ErrNoAnswer is a Responder's "I have no answer for this call".
var ErrNoAnswer = errors.New("no answer")

// NoAnswer is ErrNoAnswer saying why, in the words of the message a
// model that is not offline fails with.
func NoAnswer(why string) error { return noAnswer(why) }

type noAnswer string

func (e noAnswer) Error() string        { return string(e) }
func (e noAnswer) Is(target error) bool { return target == ErrNoAnswer }

// Reply is a Responder's answer: text, or tool calls (by the name the
// model is sent, with JSON Arguments), and the tokens it reports.
type Reply struct {
	Text      string
	ToolCalls []ToolCall
	Usage     Usage
}

// responderEndpoint stands for the Responder where an endpoint is named:
// in the limiter's key, in observed exchanges and in errors.
var responderEndpoint = &endpoint{Endpoint: Endpoint{URL: "responder"}, display: "responder"}

// respond gets the reply of one try from the Responder; answered is
// false when it left the call to an offline model.
func (c *Client) respond(ctx context.Context, req *Request, release func(int)) (rep *reply, e *Error, answered bool) {
	r, err := c.opts.Respond.Respond(ctx, req.Key)
	if err != nil && req.Model.Offline() && errors.Is(err, ErrNoAnswer) {
		return nil, nil, false
	}
	if err != nil {
		release(0)
		class := errclass.Of(err)
		if class == "" {
			class = errclass.Critical
		}
		return nil, &Error{class: class, Endpoint: responderEndpoint.display, msg: err.Error(), err: err}, true
	}
	rep = &reply{Text: r.Text, ToolCalls: r.ToolCalls, Usage: r.Usage, FinishReason: "stop"}
	if len(r.ToolCalls) > 0 {
		rep.FinishReason = "tool_calls"
	}
	release(rep.Usage.Total)
	if req.OnDelta != nil && rep.Text != "" {
		req.OnDelta(rep.Text)
	}
	return rep, nil, true
}
