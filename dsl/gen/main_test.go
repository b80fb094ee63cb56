package main

import (
	"os"
	"testing"
)

// TestGeneratedFilesAreCurrent checks that the committed schema and
// reference are what the specs and the registered functions generate.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	for path, want := range generated("../..") {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s is not what the specs generate: run go generate ./dsl", path)
		}
	}
}
