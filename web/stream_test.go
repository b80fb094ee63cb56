package web

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/internal/testwait"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
)

// TestLiveTextStreamsMidReply: a run started here streams its model's
// reply to the run page's live stream as it arrives (the fake server
// holds it after three words), escaped as JSON text; once the turn is
// recorded the stream says the reply is done, and the store holds the
// reply as a turn, never the pieces. The inspector part renders the
// node alone, for the page to put in place.
func TestLiveTextStreamsMidReply(t *testing.T) {
	h := newHarness(t, "")
	hold := make(chan struct{})
	h.fake.Push(llmtest.Reply{Text: "one two <b>three</b> four five", Hold: hold, HoldAfter: 3})
	id := h.start(url.Values{"pipeline": {"chat.yaml"}})
	ctx := testwait.HangContext(t)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.ts.URL+"/runs/"+id+"/live?after=0&status=running", nil)
	resp, err := h.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	// The stream may send the text that arrived before it connected as
	// one reset or in pieces, depending on when it connected: reply is
	// what the page shows, built as the page builds it.
	var got strings.Builder
	reply, done := "", false
	until := func(what string, cond func() bool) {
		for !cond() {
			if !lines.Scan() {
				if ctx.Err() != nil {
					t.Fatalf("no %s on the stream within %s:\n%s", what, testwait.Hang(), got.String())
				}
				t.Fatalf("the stream ended without %s:\n%s", what, got.String())
			}
			got.WriteString(lines.Text() + "\n")
			var piece struct {
				Path, Text  string
				Reset, Done bool
			}
			data, ok := strings.CutPrefix(lines.Text(), "data: ")
			if !ok || json.Unmarshal([]byte(data), &piece) != nil || piece.Path != "reply" {
				continue
			}
			if piece.Reset {
				reply = ""
			}
			reply += piece.Text
			done = done || piece.Done
		}
	}
	until("the three words before the hold", func() bool {
		if strings.Contains(reply, "four") {
			t.Fatalf("the stream shows more than arrived: %q\n%s", reply, got.String())
		}
		return reply == "one two <b>three</b> "
	})
	if !strings.Contains(got.String(), `\u003cb\u003ethree\u003c/b\u003e`) || strings.Contains(got.String(), "<b>") {
		t.Fatalf("the reply is not escaped as JSON text:\n%s", got.String())
	}
	close(hold)
	until("the reply done", func() bool { return done })
	// A reply recorded before the stream sent its tail ends the stream
	// there (the page then shows the recorded reply, checked below): what
	// was streamed is the reply's start, never other text.
	if !strings.HasPrefix("one two <b>three</b> four five", reply) {
		t.Fatalf("the stream built the reply %q", reply)
	}
	h.await(id, runtime.StatusCompleted)
	events, _, err := h.st.EventsAfter(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	turns := 0
	for _, e := range events {
		if e.Type == runtime.EventModelTurn {
			turns++
		}
	}
	if turns != 1 {
		t.Fatalf("%d model turns recorded, want 1", turns)
	}
	code, part := h.get("/runs/" + id + "/inspector?path=reply")
	if code != 200 || !strings.HasPrefix(part, `<section class="inspector" id="inspector" data-path="reply">`) ||
		!strings.Contains(part, "one two &lt;b&gt;three&lt;/b&gt; four five") || strings.Contains(part, "<html") {
		t.Fatalf("inspector part: %d\n%s", code, part)
	}
	if code, _ := h.get("/runs/nosuchrun/inspector?path=reply"); code != 404 {
		t.Fatalf("inspector of a missing run: %d", code)
	}
}

// TestNewPagesGuarded: the inspector part, the filtered list and its
// live stream answer only with the token, only loopback host names
// without one, and carry the page's Content-Security-Policy.
func TestNewPagesGuarded(t *testing.T) {
	paths := []string{"/runs/20260101T000000-pictures/inspector?path=reply", "/?text=x&after=2020-01-01T00:00&page=2", "/?batch=b1"}
	h := newHarness(t, "s3cret-token")
	recordRun(t, h, "20260101T000000-pictures", pictureOutputs)
	for _, p := range append(paths, "/live/runs?text=x") {
		if code, _ := h.get(p); code != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d", p, code)
		}
	}
	open := newHarness(t, "")
	recordRun(t, open, "20260101T000000-pictures", pictureOutputs)
	for _, p := range paths {
		req, _ := http.NewRequest(http.MethodGet, open.ts.URL+p, nil)
		req.Host = "attacker.example:8377"
		resp, err := open.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("%s for another host: %d", p, resp.StatusCode)
		}
		resp, err = open.c.Get(open.ts.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("%s: %d, CSP %q", p, resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
		}
	}
}
