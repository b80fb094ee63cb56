package web

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/internal/testneed"
)

// TestFormatUSDMatchesFigures runs the page's live cost formatter under
// node and checks it writes amounts as figures.USD does.
func TestFormatUSDMatchesFigures(t *testing.T) {
	node := testneed.Executable(t, testneed.NodeJS, "node")
	src, err := os.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(src), "function formatUSD(")
	end := strings.Index(string(src[start:]), "\n}\n")
	if start < 0 || end < 0 {
		t.Fatal("static/app.js has no formatUSD function")
	}
	values := []float64{0, 0.00005, 0.0000112, 0.00025, 0.0032000000000000006, 0.0123456, 0.42, 0.5, 0.102, 0.99996, 2.5, 1234.5, -0.00042}
	in, _ := json.Marshal(values)
	script := string(src[start:start+end+2]) + "console.log(JSON.stringify(" + string(in) + ".map(formatUSD)));"
	out, err := exec.Command(node, "-e", script).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var got []string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}
	for i, v := range values {
		if want := figures.USD(v); got[i] != want {
			t.Errorf("formatUSD(%v) = %s, figures.USD gives %s", v, got[i], want)
		}
	}
}

// TestPrettyLeavesComparisonsReadable: a value shown on a page keeps ">"
// (the template escapes it for HTML) instead of showing "\u003e".
func TestPrettyLeavesComparisonsReadable(t *testing.T) {
	if got := pretty(map[string]any{"rule": "a > b && c < d"}); !strings.Contains(got, `"a > b && c < d"`) {
		t.Errorf("pretty = %s", got)
	}
}
