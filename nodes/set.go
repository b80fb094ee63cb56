package nodes

import (
	"context"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/runtime"
)

// setNode only assigns state: the runtime applies every node's set:, and a
// set node's output is what it assigned.
type setNode struct{}

// Pure: a set node writes the run's state only.
func (setNode) Pure(*dsl.Node) bool { return true }

func (setNode) Execute(context.Context, *runtime.Scope, *dsl.Node) (runtime.Outcome, error) {
	return runtime.Outcome{UseAssigned: true}, nil
}
