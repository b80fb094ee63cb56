// Package nodes holds one executor per node kind, each in its own file.
// It is the only package that knows what a kind does; the runtime reaches
// the kinds through the Registry that Kinds returns.
package nodes

import (
	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/runtime"
)

// Kinds returns the executors of every kind this build can run with the
// given services: the control-flow kinds always, llm and agent when there
// is a model client.
func Kinds(svc Services) runtime.Registry {
	k := runtime.Registry{
		dsl.KindSet:      setNode{},
		dsl.KindBranch:   branchNode{},
		dsl.KindLoop:     loopNode{},
		dsl.KindMap:      mapNode{},
		dsl.KindParallel: parallelNode{},
		dsl.KindCall:     callNode{},
		dsl.KindAsk:      askNode{},
		dsl.KindTool:     toolNode{svc: &svc},
		dsl.KindCode:     codeNode{svc: &svc},
	}
	if svc.LLM != nil {
		k[dsl.KindLLM] = llmNode{svc: &svc}
		k[dsl.KindAgent] = agentNode{svc: &svc}
	}
	return k
}
