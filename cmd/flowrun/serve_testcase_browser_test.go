package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
)

// TestServeBrowserForkEditMakeTest is issue 33's journey in the web UI:
// a finished run forked from a checkpoint with an edited state value,
// the fork made a test with "Make this a test" (downloaded by Chromium
// as a person would), and flowrun test runs that case offline and it
// passes: it restores the checkpoint, applies the edit and expects the
// fork's outputs.
func TestServeBrowserForkEditMakeTest(t *testing.T) {
	newTab := browser(t)
	dir := t.TempDir()
	writeFile(t, dir, "greet.yaml", greetPipeline)
	useGreeter(t)
	base, _ := serve(t, dir)
	b := newTab(t)
	b.do("run it", chromedp.Navigate(base+"start?pipeline=greet.yaml"), chromedp.Click(chromedp.CSS("#start")), waitStatus("completed"))
	if got := b.text(".outputs"); !strings.Contains(got, "world") {
		t.Fatalf("the run's outputs: %q", got)
	}
	b.do("fork from checkpoint 2 with who edited", chromedp.Navigate(b.value("location.href.split('?')[0]")+"?at=2#state"),
		chromedp.WaitVisible(chromedp.CSS("#state-at")), chromedp.Click(chromedp.CSS("#fork-edit summary")),
		chromedp.SetValue(chromedp.CSS(`#fork-edit input[name="set.who"]`), "ann"),
		chromedp.Click(chromedp.CSS("#fork-edited")), chromedp.WaitVisible(chromedp.CSS("#edits")), waitStatus("completed"))
	if got := b.text("#edits"); !strings.Contains(got, `state.who "world" → "ann"`) {
		t.Fatalf("the fork's edits: %q", got)
	}
	if got := b.text(".outputs"); !strings.Contains(got, "Hello, Ann!") {
		t.Fatalf("the fork's outputs: %q", got)
	}
	downloads := t.TempDir()
	b.do("make the fork a test", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads})
		return err
	}), chromedp.Click(chromedp.CSS("#make-test")))
	var found []string
	for deadline := time.Now().Add(30 * time.Second); len(found) == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		found, _ = filepath.Glob(filepath.Join(downloads, "greet.*.test.yaml"))
	}
	if len(found) != 1 {
		t.Fatalf("Chromium downloaded %v, want one greet.RUN.test.yaml", found)
	}
	written, err := os.ReadFile(found[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"      checkpoint: 2\n", "    edits:\n      state.who: ann\n", "greeting: Hello, Ann!"} {
		if !strings.Contains(string(written), want) {
			t.Errorf("the case lacks %q:\n%s", want, written)
		}
	}
	// Saved beside the pipeline, as its first line says.
	out := writeFile(t, dir, "greet.test.yaml", string(written))
	if code, stdout, stderr := flowrun(t, "test", out); code != exitOK || !strings.Contains(stdout, "1 passed, 0 failed") {
		t.Fatalf("flowrun test: exit %d\n%s\n%s\n%s", code, stdout, stderr, written)
	}
}
