package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flowrun/flowrun/internal/testwait"
)

// TestServeBrowserYesToEveryConfirmation is the offline demo as a person
// meets it: in Chromium, start the shipped approach_proposer pipeline
// (replaying its cassette, with no model endpoint) without auto-advance
// and press Yes at every confirmation until it completes. Each Yes posts
// the state form as the browser fills it (its textareas' line breaks as
// \r\n), which must edit nothing: an edit would change the next prompt
// and miss the cassette.
func TestServeBrowserYesToEveryConfirmation(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	newTab := browser(t)
	base, log := serve(t, "../../pipelines")
	b := newTab(t)
	b.do("start approach_proposer", chromedp.Navigate(base+"start?pipeline=approach_proposer.yaml"), chromedp.Click(chromedp.CSS("#start")),
		chromedp.WaitVisible(chromedp.CSS("#status")))
	yes := 0
	deadline := time.Now().Add(testwait.Hang())
	for {
		status := b.value(`document.querySelector("#status").dataset.status + (document.querySelector("#answer-yes") ? " yes" : "")`)
		switch {
		case status == "completed":
			if yes == 0 {
				t.Fatal("the run completed without asking for a confirmation")
			}
			if b.eval(`document.querySelector("#edits") !== null`) {
				t.Fatalf("pressing Yes recorded edits:\n%s", b.text("#edits"))
			}
			return
		case status == "waiting yes":
			// The click's navigation has its response before the next page
			// replaces this one: until then this page, with the Yes just
			// pressed, is still there to be read. A mark on this page's
			// window tells the two apart.
			b.value(`window.pressed = true, ""`)
			ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
			_, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS("#answer-yes")))
			cancel()
			var aborted *chromedp.LoadError
			switch {
			case errors.Is(err, context.DeadlineExceeded):
				// The click landed while the page was being replaced:
				// look again (the whole loop is bounded by the deadline
				// below).
				continue
			case errors.As(err, &aborted) && strings.Contains(aborted.ErrorText, "ERR_ABORTED"):
				// The page reloaded itself as the run moved on, taking
				// the click's navigation with it.
			case err != nil:
				b.shot("failed-yes")
				t.Fatalf("Yes at confirmation %d: %v", yes+1, err)
			default:
				yes++
			}
			for b.value(`String(window.pressed === true)`) != "false" {
				if time.Now().After(deadline) {
					t.Fatalf("after Yes at confirmation %d the page was not replaced within %s", yes, testwait.Hang())
				}
				time.Sleep(20 * time.Millisecond)
			}
		case strings.HasPrefix(status, "failed"), strings.HasPrefix(status, "stopped"):
			b.shot("failed-run")
			t.Fatalf("after %d confirmations the run is %s:\n%s\n%s", yes, status, b.text("main"), log)
		case time.Now().After(deadline):
			b.shot("failed-stuck")
			t.Fatalf("after %d confirmations the run is still %s after %s", yes, status, testwait.Hang())
		default:
			time.Sleep(50 * time.Millisecond)
		}
	}
}
