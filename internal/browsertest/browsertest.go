// Package browsertest starts the headless Chromium that the report and
// web UI tests drive, one rule for every package that needs it.
package browsertest

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowrun/flowrun/internal/testneed"
)

// starts is how many times Start launches Chromium before it gives up.
// A launch can fail for a moment on a loaded machine (CI saw "Zygote
// could not fork" while other packages' tests ran beside it); a browser
// that is missing or broken fails every time, so three tries tell the two
// apart without hiding the second.
const starts = 3

// Chromium is the path of a headless-capable Chromium, or skips the test
// (fails it under CI=true) where there is none.
func Chromium(t testing.TB) string {
	t.Helper()
	return testneed.Executable(t, testneed.Chromium, "chromium", "chromium-browser", "google-chrome")
}

// Start launches headless Chromium with a window of width by height and
// returns its first tab, closed when the test ends. New tabs are
// chromedp.NewContext of it.
func Start(t testing.TB, width, height int) context.Context {
	t.Helper()
	exe := Chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.WindowSize(width, height))
	var err error
	for try := 1; try <= starts; try++ {
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancelTab := chromedp.NewContext(actx)
		if err = chromedp.Do(ctx); err == nil {
			t.Cleanup(func() { cancelTab(); cancelAlloc() })
			return ctx
		}
		cancelTab()
		cancelAlloc()
		t.Logf("%s did not start (try %d of %d): %v", exe, try, starts, err)
	}
	testneed.Need(t, testneed.Chromium, fmt.Errorf("%s does not start: %w", exe, err))
	return nil
}
