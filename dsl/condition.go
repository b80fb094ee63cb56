package dsl

import (
	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
)

// Condition is an expr-lang condition over one dataset item, given on the
// command line (batch --filter). It is guarded and evaluated within
// ExpressionBudget like every expression of a pipeline, since a command
// line is input as untrusted as a pipeline file.
type Condition struct{ prog *vm.Program }

// conditionEnv is what a Condition sees.
type conditionEnv struct {
	Item map[string]any `expr:"item"`

	budget // of the evaluation running in this environment
}

// CompileCondition compiles src, which must be true or false.
func CompileCondition(src string) (*Condition, error) {
	opts := append([]expr.Option{expr.Env(conditionEnv{}), expr.AsBool()}, guardOptions()...)
	prog, err := expr.Compile(src, opts...)
	if err != nil {
		return nil, err
	}
	return &Condition{prog: prog}, nil
}

// Match evaluates the condition over item. An evaluation that outgrows
// its budget fails with a *LimitError.
func (c *Condition) Match(item map[string]any) (bool, error) {
	v, err := runProgram(c.prog, &conditionEnv{Item: item})
	if err != nil {
		return false, err
	}
	return v == true, nil
}
