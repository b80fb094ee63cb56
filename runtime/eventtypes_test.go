package runtime_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/runtime"
)

// TestEventTypesListsEveryType fails when event.go declares an Event*
// type that EventTypes leaves out: whatever describes events (eventview)
// would never be asked to describe it.
func TestEventTypesListsEveryType(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "event.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	listed := runtime.EventTypes()
	declared := 0
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range spec.Names {
			if !strings.HasPrefix(name.Name, "Event") || i >= len(spec.Values) {
				continue
			}
			lit, ok := spec.Values[i].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				continue
			}
			declared++
			if v, _ := strconv.Unquote(lit.Value); !slices.Contains(listed, v) {
				t.Errorf("%s (%q) is not in EventTypes()", name.Name, v)
			}
		}
		return true
	})
	if declared != len(listed) {
		t.Errorf("event.go declares %d event types, EventTypes lists %d", declared, len(listed))
	}
}
