package llm

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/llmconf"
)

func (f *memoryInFlight) snapshot() *memoryInFlight {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &memoryInFlight{m: map[int]BackgroundCall{}}
	for k, v := range f.m {
		out.m[k] = v
	}
	return out
}

// backgroundEvents collects what a call reports about its responses.
type backgroundEvents struct {
	mu sync.Mutex
	ev []BackgroundEvent
}

func (b *backgroundEvents) add(ev BackgroundEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ev = append(b.ev, ev)
}

func (b *backgroundEvents) whats() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, e := range b.ev {
		out = append(out, e.What+":"+e.Status)
	}
	return strings.Join(out, " ")
}

func backgroundModel() *llmconf.Model {
	return &llmconf.Model{Name: "deep", Model: "o3", API: "responses", Background: true, Poll: time.Millisecond}
}

func TestBackgroundCreatesOnceAndPolls(t *testing.T) {
	srv := llmtest.New(t)
	c, sl := testClient(t, srv)
	srv.Push(llmtest.Reply{Text: "deep answer", Polls: 3, Usage: llmtest.Usage{Prompt: 10, Completion: 5}})
	var evs backgroundEvents
	in := &memoryInFlight{}
	resp, err := c.Complete(context.Background(), Request{Model: backgroundModel(), Messages: userSays("think"), InFlight: in, OnBackground: evs.add})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "deep answer" || resp.Usage.Total != 15 {
		t.Errorf("response %+v", resp)
	}
	if n := srv.Creates(); n != 1 {
		t.Errorf("%d creates, want 1", n)
	}
	body := srv.Requests()[0].Body
	if body["background"] != true || body["store"] != true {
		t.Errorf("create sent background %v store %v, want both true", body["background"], body["store"])
	}
	want := "created:queued polled:in_progress polled:in_progress polled:in_progress polled:completed completed:completed"
	if got := evs.whats(); got != want {
		t.Errorf("events\n got %s\nwant %s", got, want)
	}
	if bc, _ := in.Lookup(1); bc.ID != "resp_1" || bc.Status != "queued" {
		t.Errorf("recorded %+v, want resp_1 queued", bc)
	}
	// The waits grow by half from poll: 1ms.
	if w := sl.waits(); len(w) != 4 || w[0] != time.Millisecond || w[3] <= w[0] {
		t.Errorf("poll waits %v", w)
	}
}

func TestBackgroundReattachesInsteadOfCreating(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.Reply{Text: "paid once", Polls: 2})
	in := &memoryInFlight{}
	var left *memoryInFlight
	died := make(chan struct{})
	srv.OnBackground(func(ev llmtest.BackgroundEvent) {
		if ev.What == "poll" && ev.Polls == 1 {
			// The first process dies here: what it recorded is all a
			// resume has.
			left = in.snapshot()
			close(died)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	first, _ := testClient(t, srv, func(o *Options) {
		o.HTTPClient = &http.Client{Transport: dyingTransport{died: died}}
	})
	_, err := first.Complete(ctx, Request{Model: backgroundModel(), Messages: userSays("think"), InFlight: in})
	cancel()
	if err == nil {
		t.Fatal("the dead process's call succeeded")
	}
	srv.OnBackground(nil)

	second, _ := testClient(t, srv)
	var evs backgroundEvents
	resp, err := second.Complete(context.Background(), Request{Model: backgroundModel(), Messages: userSays("think"), InFlight: left, OnBackground: evs.add})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "paid once" {
		t.Errorf("text %q", resp.Text)
	}
	if n := srv.Creates(); n != 1 {
		t.Errorf("%d creates, want 1: the resumed call must re-attach", n)
	}
	if got := evs.whats(); !strings.HasPrefix(got, "attached:queued polled:") {
		t.Errorf("events %s, want attached first", got)
	}
}

func TestBackgroundCompletedWhileNobodyPolled(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.Reply{Text: "finished alone"})
	in := &memoryInFlight{}
	c, sl := testClient(t, srv)
	// Only the create happened: the process died before its first poll,
	// and the response finished meanwhile.
	if _, err := c.Complete(context.Background(), Request{Model: backgroundModel(), Messages: userSays("x"), InFlight: in}); err != nil {
		t.Fatal(err)
	}
	left := &memoryInFlight{m: map[int]BackgroundCall{1: {ID: "resp_1", Status: "queued"}}}
	waited := len(sl.waits())
	resp, err := c.Complete(context.Background(), Request{Model: backgroundModel(), Messages: userSays("x"), InFlight: left})
	if err != nil || resp.Text != "finished alone" {
		t.Fatalf("collect: %v %+v", err, resp)
	}
	if w := sl.waits()[waited:]; len(w) != 0 {
		t.Errorf("the resumed call waited %v before asking: it should ask at once", w)
	}
	if n := srv.Creates(); n != 1 {
		t.Errorf("%d creates, want 1", n)
	}
}

func TestBackgroundCancelledWhenTheCallEnds(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.Reply{Text: "never", Polls: 1 << 30})
	in := &memoryInFlight{}
	ctx, stop := context.WithCancel(context.Background())
	srv.OnBackground(func(ev llmtest.BackgroundEvent) {
		if ev.What == "poll" && ev.Polls == 2 {
			stop()
		}
	})
	c, _ := testClient(t, srv)
	var evs backgroundEvents
	_, err := c.Complete(ctx, Request{Model: backgroundModel(), Messages: userSays("x"), InFlight: in, OnBackground: evs.add})
	if errclass.Of(err) != errclass.Cancelled {
		t.Fatalf("err %v (class %s), want cancelled", err, errclass.Of(err))
	}
	select {
	case id := <-srv.Cancels():
		if id != "resp_1" {
			t.Errorf("cancelled %s", id)
		}
	default:
		t.Fatal("the response was not cancelled on the server")
	}
	if srv.Status("resp_1") != "cancelled" {
		t.Errorf("server status %s", srv.Status("resp_1"))
	}
	if bc, _ := in.Lookup(1); bc.Status != "cancelled" {
		t.Errorf("recorded %+v, want cancelled", bc)
	}
	if got := evs.whats(); !strings.HasSuffix(got, "cancelled:cancelled") {
		t.Errorf("events %s", got)
	}
	// A resumed call creates a new response rather than collect a
	// cancelled one.
	srv.Push(llmtest.Text("again"))
	if resp, err := c.Complete(context.Background(), Request{Model: backgroundModel(), Messages: userSays("x"), InFlight: in}); err != nil || resp.Text != "again" {
		t.Fatalf("after cancel: %v %+v", err, resp)
	}
	if n := srv.Creates(); n != 2 {
		t.Errorf("%d creates, want 2", n)
	}
}

func TestBackgroundFailedIsClassedAndRetried(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(
		llmtest.Reply{Text: "x", Fail: &llmtest.Failure{Code: "server_error", Message: "The model crashed."}},
		llmtest.Reply{Text: "x", Fail: &llmtest.Failure{Code: "invalid_prompt", Message: "Bad prompt."}},
	)
	in := &memoryInFlight{}
	c, _ := testClient(t, srv)
	// server_error is recoverable: retried with a new response;
	// invalid_prompt is critical: the node fails at once.
	_, err := c.Complete(context.Background(), Request{Model: backgroundModel(), Messages: userSays("x"), InFlight: in})
	if errclass.Of(err) != errclass.Critical || !strings.Contains(err.Error(), "Bad prompt") {
		t.Fatalf("err %v (class %s), want the critical invalid_prompt", err, errclass.Of(err))
	}
	if n := srv.Creates(); n != 2 {
		t.Errorf("%d creates, want 2 (a failed response is created again, a critical failure is not)", n)
	}
}

func TestBackgroundStreamResumesAfterTheLastEvent(t *testing.T) {
	const text = "the quick brown fox jumps over the lazy dog"
	srv := llmtest.New(t)
	srv.Push(llmtest.Reply{Text: text, Cut: true})
	c, _ := testClient(t, srv)
	m := backgroundModel()
	m.Stream = "true"
	var got strings.Builder
	in := &memoryInFlight{}
	polls := 0
	srv.OnBackground(func(ev llmtest.BackgroundEvent) {
		if ev.What == "poll" {
			polls++
			// Cut after the first delta, event 1: the stream resumes
			// after it, not from the start.
			if ev.StartingAfter != 1 {
				t.Errorf("the stream resumed after event %d, want 1", ev.StartingAfter)
			}
		}
	})
	resp, err := c.Complete(context.Background(), Request{Model: m, Messages: userSays("x"), InFlight: in, OnDelta: func(s string) { got.WriteString(s) }})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != text || got.String() != text {
		t.Errorf("response %q, streamed %q; want %q for both", resp.Text, got.String(), text)
	}
	if n := srv.Creates(); n != 1 {
		t.Errorf("%d creates", n)
	}
	if polls != 1 {
		t.Errorf("%d streams resumed, want 1", polls)
	}
}

// A process that dies mid-stream leaves the response id and how far it
// read; the next one resumes the stream there, and ends with the same
// text.
func TestBackgroundStreamAfterRestart(t *testing.T) {
	const text = "one two three four five"
	srv := llmtest.New(t)
	srv.Push(llmtest.Reply{Text: text, Cut: true})
	m := backgroundModel()
	m.Stream = "true"
	in := &memoryInFlight{}
	died := make(chan struct{})
	var mu sync.Mutex
	clock := time.Now()
	first, _ := testClient(t, srv, func(o *Options) {
		o.HTTPClient = &http.Client{Transport: dyingTransport{died: died}}
		// Each reading of the clock is 6s later: the position is recorded
		// after every delta.
		o.Now = func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			clock = clock.Add(6 * time.Second)
			return clock
		}
	})
	var once sync.Once
	_, err := first.Complete(context.Background(), Request{Model: m, Messages: userSays("x"), InFlight: in, OnDelta: func(string) {
		once.Do(func() { close(died) })
	}})
	if err == nil {
		t.Fatal("the dead process's call succeeded")
	}
	resumedAfter := -2
	srv.OnBackground(func(ev llmtest.BackgroundEvent) {
		if ev.What == "poll" {
			resumedAfter = ev.StartingAfter
		}
	})
	second, _ := testClient(t, srv)
	var shown strings.Builder
	resp, err := second.Complete(context.Background(), Request{Model: m, Messages: userSays("x"), InFlight: in.snapshot(), OnDelta: func(s string) { shown.WriteString(s) }})
	if err != nil {
		t.Fatal(err)
	}
	if resumedAfter != 1 {
		t.Errorf("the new process resumed the stream after event %d, want 1 (the first delta, which the dead one read)", resumedAfter)
	}
	if resp.Text != text || shown.String() != strings.TrimPrefix(text, "one ") {
		t.Errorf("text %q, shown %q; want %q, of which the new process shows all but the first word", resp.Text, shown.String(), text)
	}
	if n := srv.Creates(); n != 1 {
		t.Errorf("%d creates, want 1", n)
	}
}

func TestBackgroundUnsupportedNamesModelAndField(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.Error(400, "Unrecognized request argument supplied: background"))
	c, _ := testClient(t, srv)
	_, err := c.Complete(context.Background(), Request{Model: backgroundModel(), Messages: userSays("x")})
	var e *Error
	if !errors.As(err, &e) || !strings.Contains(err.Error(), `model "deep" has background: true`) || !strings.Contains(err.Error(), "set background: false") {
		t.Fatalf("err %v", err)
	}
}

// dyingTransport sends requests until died is closed, and then none: the
// process that made them is gone.
type dyingTransport struct{ died chan struct{} }

func (d dyingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	select {
	case <-d.died:
		return nil, errors.New("the process is dead")
	default:
		return http.DefaultTransport.RoundTrip(r)
	}
}

// A poll that fails (a dropped connection) is retried against the same
// response, even with no InFlight given.
func TestBackgroundPollErrorKeepsTheResponse(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.Reply{Text: "kept", Polls: 2})
	c, _ := testClient(t, srv, func(o *Options) {
		o.HTTPClient = &http.Client{Transport: &failFirstPoll{}}
	})
	resp, err := c.Complete(context.Background(), Request{Model: backgroundModel(), Messages: userSays("x")})
	if err != nil || resp.Text != "kept" {
		t.Fatalf("%v %+v", err, resp)
	}
	if n := srv.Creates(); n != 1 {
		t.Errorf("%d creates, want 1", n)
	}
}

// failFirstPoll drops the first GET, as a broken connection would.
type failFirstPoll struct{ failed bool }

func (f *failFirstPoll) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && !f.failed {
		f.failed = true
		return nil, errors.New("connection reset by peer")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestReadBackgroundCall: a record reads back as the call it kept; one
// that is not JSON or names no response reads as nothing in flight.
func TestReadBackgroundCall(t *testing.T) {
	bc, ok := ReadBackgroundCall([]byte(`{"id":"resp_1","status":"in_progress","seq":7}`))
	if !ok || bc != (BackgroundCall{ID: "resp_1", Status: "in_progress", Seq: 7}) {
		t.Errorf("a kept record read back as %+v, %v", bc, ok)
	}
	for _, raw := range []string{``, `not json`, `{"status":"queued"}`, `[1]`} {
		if bc, ok := ReadBackgroundCall([]byte(raw)); ok {
			t.Errorf("%q read as a call in flight: %+v", raw, bc)
		}
	}
}
