package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Background mode: a request to /v1/responses with background: true is
// answered at once with the response queued; GET /v1/responses/{id}
// (plain, or streamed with stream=true and starting_after) advances it,
// and POST /v1/responses/{id}/cancel cancels it. The reply scripted for
// the create is what the response ends with, after Reply.Polls polls that
// find it in progress.

// backgroundState is every background response the server created.
type backgroundState struct {
	byID    map[string]*backgroundResponse
	creates int
	hook    func(BackgroundEvent)
	cancels chan string
}

type backgroundResponse struct {
	req    Request
	rep    Reply
	status string // queued, in_progress, or how it ended
	polls  int
}

// BackgroundEvent is what the server is about to answer about a
// background response: "create" (the response exists; the client has not
// been told its id yet), "poll" (Polls is the poll's number) or "cancel".
type BackgroundEvent struct {
	What  string
	ID    string
	Polls int
	// StartingAfter, on a streamed poll, is the sequence number it
	// resumes after (-1 when it asked for the whole stream); on a plain
	// poll, -1.
	StartingAfter int
}

// OnBackground sets a function called before the server answers a create,
// a poll or a cancel of a background response, holding no lock: a test
// can block there, or kill the client, at that point.
func (s *Server) OnBackground(f func(BackgroundEvent)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bg.hook = f
}

// Creates is the number of background responses created.
func (s *Server) Creates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bg.creates
}

// Cancels delivers the id of each background response cancelled, in
// order (buffered: at most 100 are kept unread).
func (s *Server) Cancels() <-chan string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bgCancels()
}

func (s *Server) bgCancels() chan string {
	if s.bg.cancels == nil {
		s.bg.cancels = make(chan string, 100)
	}
	return s.bg.cancels
}

// Status is the status of background response id ("" if none).
func (s *Server) Status(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.bg.byID[id]; b != nil {
		return b.status
	}
	return ""
}

func backgroundPath(path string) (id string, cancel, ok bool) {
	rest, ok := strings.CutPrefix(path, "/v1/responses/")
	if !ok || rest == "" {
		return "", false, false
	}
	id, cancel = strings.CutSuffix(rest, "/cancel")
	return id, cancel, true
}

func (s *Server) hook(ev BackgroundEvent) {
	s.mu.Lock()
	h := s.bg.hook
	s.mu.Unlock()
	if h != nil {
		h(ev)
	}
}

// create keeps a background response and answers with it queued, or, on
// a streamed request, streams it from its start.
func (s *Server) create(w http.ResponseWriter, r *http.Request, req Request, rep Reply) {
	id := fmt.Sprintf("resp_%d", req.N)
	b := &backgroundResponse{req: req, rep: rep, status: "queued"}
	s.mu.Lock()
	if s.bg.byID == nil {
		s.bg.byID = map[string]*backgroundResponse{}
	}
	s.bg.byID[id] = b
	s.bg.creates++
	s.mu.Unlock()
	s.hook(BackgroundEvent{What: "create", ID: id})
	if req.Stream {
		s.streamBackground(w, r, b, -1, rep.Cut)
		return
	}
	writeJSON(w, b.object("queued"))
}

// object is the response as a poll shows it with status.
func (b *backgroundResponse) object(status string) map[string]any {
	obj := response(b.req, b.rep)
	obj["background"] = true
	switch status {
	case "completed", "incomplete":
		return obj
	case "failed":
		obj["error"] = map[string]any{"code": b.rep.Fail.Code, "message": b.rep.Fail.Message}
	}
	obj["status"], obj["output"], obj["usage"], obj["incomplete_details"] = status, []any{}, nil, nil
	return obj
}

// finish ends the response as scripted.
func (b *backgroundResponse) finish() {
	switch {
	case b.rep.Fail != nil:
		b.status = "failed"
	default:
		b.status = response(b.req, b.rep)["status"].(string)
	}
}

func (b *backgroundResponse) ended() bool {
	return b.status != "queued" && b.status != "in_progress"
}

func (s *Server) serveBackground(w http.ResponseWriter, r *http.Request, id string, cancel bool) {
	s.mu.Lock()
	b := s.bg.byID[id]
	s.mu.Unlock()
	if b == nil {
		rep := Error(404, fmt.Sprintf("No response found with id '%s'.", id))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(404)
		_, _ = w.Write([]byte(rep.Body))
		return
	}
	if cancel {
		s.hook(BackgroundEvent{What: "cancel", ID: id})
		s.mu.Lock()
		if !b.ended() {
			b.status = "cancelled"
		}
		status := b.status
		s.bgCancels() <- id
		s.mu.Unlock()
		writeJSON(w, b.object(status))
		return
	}
	s.mu.Lock()
	b.polls++
	polls := b.polls
	s.mu.Unlock()
	stream, after := streamed(r), -1
	if v, err := strconv.Atoi(r.URL.Query().Get("starting_after")); err == nil && stream {
		after = v
	}
	s.hook(BackgroundEvent{What: "poll", ID: id, Polls: polls, StartingAfter: after})
	s.mu.Lock()
	if !b.ended() {
		b.status = "in_progress"
		if polls > b.rep.Polls {
			b.finish()
		}
	}
	status := b.status
	s.mu.Unlock()
	if stream {
		s.streamBackground(w, r, b, after, false)
		return
	}
	writeJSON(w, b.object(status))
}

// streamBackground streams a background response's events after sequence
// number after (-1: all), cutting after the first delta when cut. The
// stream ends with the response: it is complete once streamed. A response
// still in progress (the stream comes before Reply.Polls polls) sends no
// more than response.created and then holds the stream open until the
// client goes away or cancels it.
func (s *Server) streamBackground(w http.ResponseWriter, r *http.Request, b *backgroundResponse, after int, cut bool) {
	sse := newSSE(w)
	s.mu.Lock()
	working := !b.ended() && b.rep.Polls > 0
	s.mu.Unlock()
	for _, ev := range responseEvents(b.req, b.rep, "queued") {
		if ev["sequence_number"].(int) <= after {
			continue
		}
		if working && ev["type"] != "response.created" {
			<-r.Context().Done()
			return
		}
		sse.event(ev["type"].(string), ev)
		if cut && ev["type"] == "response.output_text.delta" {
			return
		}
	}
	s.mu.Lock()
	if !b.ended() {
		b.finish()
	}
	s.mu.Unlock()
}

// streamed reports whether a poll asks for a stream: stream=true in the
// query, as the API documents it, or in a JSON body, as openai-go's
// GetStreaming sends it.
func streamed(r *http.Request) bool {
	if r.URL.Query().Get("stream") == "true" {
		return true
	}
	var body struct {
		Stream bool `json:"stream"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	return body.Stream
}
