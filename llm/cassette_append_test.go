package llm

import (
	"path/filepath"
	"testing"
)

// A cassette appended to a file counts its calls on after the file's, so
// that a call recorded again under the same key replays second, not
// instead of the first.
func TestCassetteAppendFileCountsRepeatsOn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.cassette.yaml")
	first, second := NewCassette(), NewCassette()
	first.RecordMCP(MCPCall{Node: "solve[1]/fs.read", Tool: "fs.read", Value: "before"})
	second.RecordMCP(MCPCall{Node: "solve[1]/fs.read", Tool: "fs.read", Value: "after"})
	second.RecordMCPTools("fs", []ToolSpec{{Name: "read"}})
	if err := first.AppendFile(path); err != nil {
		t.Fatal(err)
	}
	if err := second.AppendFile(path); err != nil {
		t.Fatal(err)
	}
	c, err := LoadCassette(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"before", "after"} {
		got, err := c.ReplayMCP("solve[1]/fs.read", "fs.read")
		if err != nil || got.Value != want {
			t.Fatalf("replayed %+v, %v; want %q", got, err, want)
		}
	}
	if _, ok := c.MCPTools("fs"); !ok {
		t.Error("the appended listing is missing")
	}
}
