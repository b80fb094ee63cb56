package batch

import (
	"bytes"
	"context"
	"fmt"
	"github.com/flowrun/flowrun/batch/batchtest"
	"github.com/flowrun/flowrun/internal/browsertest"
	"github.com/flowrun/flowrun/internal/testwait"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const xss = `<script>alert(1)</script>`

// reportFixture records a batch A and a batch B of 40 items that differ
// by 9 fixed and 3 broken items, with one failure whose error and one
// reply whose text hold markup, and writes B's report against A.
func reportFixture(t *testing.T) (html string, a, b string) {
	t.Helper()
	st := batchtest.OpenStore(t)
	ks := batchtest.Keys("task-", 40)
	pa := "PPPFFFFFFFFPPPPPPPPPPPPPFFFFFPPPEPFFPPS."
	pb := "FFPPPPPPPPPPPPPPPFPPPPPPFFFFFPPPEPFFPPP."
	ba := batchtest.Record(t, st, "b20261122T100000-aaaa", ks, pa, 1, "")
	bb := batchtest.Record(t, st, "b20261122T110000-bbbb", ks, pb, 1.3, "tool said "+xss)
	var buf bytes.Buffer
	if err := WriteReport(context.Background(), st, &buf, bb, ba); err != nil {
		t.Fatal(err)
	}
	return buf.String(), ba.ID, bb.ID
}

// TestReportSelfContained checks that the report needs nothing from the
// network, links every item to its run's embedded timeline, and shows
// text from the store as text.
func TestReportSelfContained(t *testing.T) {
	page, _, bID := reportFixture(t)
	for _, banned := range []string{"http://", "https://", "<link", " src=", "@import", "url("} {
		if strings.Contains(page, banned) {
			t.Errorf("the report contains %q: it must open with no network", banned)
		}
	}
	if strings.Contains(page, xss) || strings.Count(page, "<script") != 1 {
		t.Errorf("markup from the store reached the page unescaped (%d script elements)", strings.Count(page, "<script"))
	}
	if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the failure text is missing from the page")
	}
	for _, r := range []string{bID + "-r01", bID + "-r33", "b20261122T100000-aaaa-r01"} {
		if !strings.Contains(page, `href="#run-`+r+`"`) || !strings.Contains(page, `<details class="run" id="run-`+r+`"`) {
			t.Errorf("run %s is not linked to an embedded timeline", r)
		}
	}
	if strings.Contains(page, `id="run-`+bID+`-r40"`) {
		t.Error("a pending item got a timeline")
	}
	// Every link inside the page points at an anchor it has.
	for _, m := range regexp.MustCompile(`href="#([^"]+)"`).FindAllStringSubmatch(page, -1) {
		if !strings.Contains(page, `id="`+m[1]+`"`) {
			t.Errorf("link to #%s has no target", m[1])
		}
	}
	for _, want := range []string{"Fixed <span class=\"tag fixed\">9</span>", "Broken <span class=\"tag broken\">3</span>",
		"The answer is task-01", "model_error", "gpt-4.1-mini", "McNemar p"} {
		if !strings.Contains(page, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

// TestReportScreenshot renders a report in headless Chromium and checks
// the picture is a real page, not a blank or an error screen's worth of
// pixels. FLOWRUN_REPORT_SCREENSHOT=1 keeps it in testdata/out/.
func TestReportScreenshot(t *testing.T) {
	browser := browsertest.Chromium(t)
	page, _, _ := reportFixture(t)
	dir := t.TempDir()
	report := filepath.Join(dir, "report.html")
	if err := os.WriteFile(report, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "report.png")
	cmd := exec.CommandContext(testwait.Context(t), browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--screenshot="+shot, "--window-size=1280,1600", "file://"+report)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", browser, err, out)
	}
	data, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("chromium wrote no screenshot: %v\n%s", err, out)
	}
	if len(data) < 50<<10 {
		t.Errorf("screenshot is %d bytes: too small for a rendered report", len(data))
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 1600 {
		t.Errorf("screenshot is %dx%d, want 1280x1600", b.Dx(), b.Dy())
	}
	if n := colours(img); n < 20 {
		t.Errorf("screenshot has %d colours: the page did not render", n)
	}
	if os.Getenv("FLOWRUN_REPORT_SCREENSHOT") != "" {
		if err := os.MkdirAll(filepath.Join("testdata", "out"), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{"report.png": data, "report.html": []byte(page)} {
			if err := os.WriteFile(filepath.Join("testdata", "out", name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("kept testdata/out/report.png and report.html")
	}
}

// colours counts the distinct colours of img, up to 1000.
func colours(img image.Image) int {
	seen := map[string]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			r, g, bl, _ := img.At(x, y).RGBA()
			seen[fmt.Sprint(r>>8, g>>8, bl>>8)] = true
			if len(seen) >= 1000 {
				return len(seen)
			}
		}
	}
	return len(seen)
}

// TestCostHistogram: every item that ran is in one bin, and items that
// all cost the same make one bar in the middle rather than at an edge.
func TestCostHistogram(t *testing.T) {
	rows := func(costs ...float64) *Summary {
		s := &Summary{}
		for i, c := range costs {
			s.Rows = append(s.Rows, Row{Index: i, Run: fmt.Sprint("r", i), CostUSD: c})
		}
		s.Rows = append(s.Rows, Row{Index: len(costs)}) // pending: not counted
		return s
	}
	c := newCostChart(rows(0.01, 0.02, 0.02, 0.05, 0.10), nil)
	total := 0
	for _, b := range c.Bars {
		total += b.Count
	}
	if c.Items != 5 || total != 5 || c.Bars[0].Count != 1 || c.Bars[histBins-1].Count != 1 || c.MaxCount != 2 {
		t.Errorf("items %d, binned %d, first %d, last %d, max %d", c.Items, total, c.Bars[0].Count, c.Bars[histBins-1].Count, c.MaxCount)
	}
	c = newCostChart(rows(0.003, 0.003, 0.003), nil)
	if c.Bars[histBins/2].Count != 3 {
		t.Errorf("equal costs: bins %+v", c.Bars)
	}
	if c := newCostChart(rows(), nil); c.Items != 0 || c.Bars != nil {
		t.Errorf("no item ran: %+v", c)
	}
	c = newCostChart(rows(0.0002, 0.00022, 0.0003), nil)
	if got := fmt.Sprint(c.Ticks[0].Label, " ", c.Ticks[1].Label, " ", c.Ticks[2].Label); got != "$0.0002 $0.00025 $0.0003" {
		t.Errorf("cost axis reads %s, want distinct ticks $0.0002 $0.00025 $0.0003", got)
	}
	if b := c.Bars[0]; b.From == b.To {
		t.Errorf("a bin's edges read the same: %s-%s", b.From, b.To)
	}
	c = newCostChart(rows(0.01, 0.02), rows(0.03))
	if len(c.Bars) != 2*histBins || c.Bars[0].Series != "A" || c.Bars[1].Series != "B" {
		t.Errorf("with a base batch, A and B side by side in each bin: %+v", c.Bars[:2])
	}
}
