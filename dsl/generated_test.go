package dsl

import (
	"os"
	"testing"
)

// TestGeneratedFilesAreCurrent checks that the committed schema and
// reference are what the specs generate.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	for path, want := range map[string]string{
		"../schemas/pipeline.schema.json": string(Schema()),
		"../docs/reference.md":            Reference(),
	} {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s is not what the specs generate: run go generate ./dsl", path)
		}
	}
}
