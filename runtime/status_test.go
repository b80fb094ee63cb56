package runtime_test

import (
	"strings"
	"testing"

	"github.com/flowrun/flowrun/runtime"
)

// TestParseStatus: every status reads back by its name; a near miss is
// suggested, and an unknown name lists the statuses.
func TestParseStatus(t *testing.T) {
	for _, s := range runtime.Statuses() {
		if got, err := runtime.ParseStatus(string(s)); err != nil || got != s {
			t.Errorf("ParseStatus(%q) = %q, %v", s, got, err)
		}
	}
	_, err := runtime.ParseStatus("faild")
	if err == nil || !strings.Contains(err.Error(), `did you mean "failed"?`) || !strings.Contains(err.Error(), strings.Join(runtime.StatusNames(), ", ")) {
		t.Errorf("ParseStatus(faild): %v", err)
	}
	if _, err := runtime.ParseStatus(""); err == nil {
		t.Error("ParseStatus(\"\") is a status")
	}
}
