package dsl

import (
	"slices"
	"sort"
	"testing"
)

// TestSchemaAgreesWithDecoder checks that the schema's node fields are
// exactly the fields the decoder reads: the common ones and one per kind.
func TestSchemaAgreesWithDecoder(t *testing.T) {
	_, doc := pipelineSchema()
	defs := doc["$defs"].(map[string]any)
	node := defs["node"].(map[string]any)
	props := node["properties"].(map[string]any)
	common := []string{"id", "description", "when", "set", "next", "retry", "on_error", "timeout", "confirm", "default"}
	var want []string
	want = append(want, common...)
	for _, k := range kindKeys {
		want = append(want, string(k))
	}
	var got []string
	for k := range props {
		got = append(got, k)
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("schema node properties %v\ndecoder reads %v", got, want)
	}
}
