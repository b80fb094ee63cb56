package batch

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/batch/batchtest"
)

// TestWriteReportFileKeepsTheEarlierOne: the report lands whole and
// readable by others; a report that fails leaves the earlier file as it
// was and no temporary file.
func TestWriteReportFileKeepsTheEarlierOne(t *testing.T) {
	ctx := context.Background()
	st := batchtest.OpenStore(t)
	b := batchtest.Record(t, st, "b20261126T100000-aaaa", batchtest.Keys("t", 2), "PF", 1, "")
	path := filepath.Join(t.TempDir(), "r.html")
	if err := WriteReportFile(ctx, st, path, b, nil); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(path)
	fi, _ := os.Stat(path)
	if err != nil || !strings.Contains(string(page), "</html>") || fi.Mode().Perm() != 0o644 {
		t.Fatalf("report: %v, mode %v, %.100s", err, fi.Mode(), page)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := WriteReportFile(cancelled, st, path, b, nil); err == nil {
		t.Fatal("a report whose reading was cancelled was written")
	}
	again, _ := os.ReadFile(path)
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".r.html.*"))
	if string(again) != string(page) || len(left) > 0 {
		t.Errorf("the failed report changed the earlier one (%v) or left %v", string(again) != string(page), left)
	}
}
