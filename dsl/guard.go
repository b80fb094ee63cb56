package dsl

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"

	"github.com/flowrun/flowrun/errclass"
)

// ExpressionBudget is how much work one evaluation of an expression may
// do, in units: one per iteration of a closure (the body of map, filter,
// count, reduce ...), one per element of a list or map a call or a +
// returns, and one per 32 bytes of text they return. expr-lang counts the
// lists and ranges it builds against a budget of the same size. Both
// allow a few seconds of CPU and 64 MB of text at most: far more than an
// expression in a pipeline needs, far less than brings the process down.
const ExpressionBudget = 2_000_000

// bytesPerUnit is how many bytes of text one unit of ExpressionBudget
// stands for.
const bytesPerUnit = 32

// LimitError is an evaluation stopped by its budget or its node's
// cancellation: class expression_limit.
type LimitError struct{ Why string }

func (e *LimitError) Error() string {
	return "expression stopped: " + e.Why
}

// Class is errclass.ExpressionLimit.
func (e *LimitError) Class() errclass.Class { return errclass.ExpressionLimit }

// vmBudgetMessage is what expr-lang's VM panics with when its own budget
// is spent.
const vmBudgetMessage = "memory budget exceeded"

var errOverBudget = &LimitError{Why: fmt.Sprintf("it needs more than %d units of work and memory, the most one evaluation may use (loops over long lists, or text built past %d MB)", ExpressionBudget, ExpressionBudget*bytesPerUnit/1_000_000)}

// budget is what one evaluation has spent, and the context that cancels
// it. An environment holds one; evaluations in one environment never
// overlap, as the runtime evaluates a scope's expressions in turn.
type budget struct {
	ctx   context.Context // nil: never cancelled
	spent uint
}

// charge spends units, and checks for cancellation.
func (b *budget) charge(units uint) error {
	if b.ctx != nil {
		select {
		case <-b.ctx.Done():
			return &LimitError{Why: "its node was cancelled while it ran (" + context.Cause(b.ctx).Error() + ")"}
		default:
		}
	}
	b.spent += units
	if b.spent > ExpressionBudget {
		return errOverBudget
	}
	return nil
}

// budgetOf is the budget of an environment, nil for one that has none
// (the variables of a render template).
func budgetOf(env any) *budget {
	switch e := env.(type) {
	case *Env:
		return &e.budget
	case *ScoreEnv:
		return &e.budget
	case *conditionEnv:
		return &e.budget
	}
	return nil
}

// SetContext makes ctx the context whose cancellation stops the
// evaluations in e, and returns the one it replaces.
func (e *Env) SetContext(ctx context.Context) context.Context {
	prev := e.budget.ctx
	e.budget.ctx = ctx
	return prev
}

// guardOptions patch every expression so that its loops, and what it
// builds, are charged to the evaluation's budget, and its loops stop when
// the node is cancelled.
func guardOptions() []expr.Option {
	opts := []expr.Option{expr.Patch(guard{})}
	for _, f := range guardFunctions {
		opts = append(opts, expr.Function(f.name, f.fn, f.types...))
	}
	return opts
}

type guardFunction struct {
	name  string
	fn    func(...any) (any, error)
	types []any
}

// The guard's functions, one per type so that a wrapped node keeps its
// type for the checker. Their names start with $, which no expression
// can write.
var (
	stepFns = map[reflect.Type]string{}
	costFns = map[reflect.Type]string{}

	guardFunctions = func() []guardFunction {
		var fns []guardFunction
		add := func(names map[reflect.Type]string, prefix string, fn func(...any) (any, error), types ...any) {
			for _, t := range types {
				ft := reflect.TypeOf(t).Elem()
				name := prefix + ft.In(0).String()
				names[ft.In(0)] = name
				fns = append(fns, guardFunction{name, fn, []any{t}})
			}
		}
		add(stepFns, "$step_", step, new(func(bool, any) bool), new(func(int, any) int), new(func(float64, any) float64),
			new(func(string, any) string), new(func(any, any) any))
		add(costFns, "$cost_", cost, new(func(string, any) string), new(func([]any, any) []any), new(func([]string, any) []string),
			new(func(map[string]any, any) map[string]any), new(func(any, any) any))
		// repeat and replace allocate their result before anything can
		// charge it: they check its size first.
		return append(fns,
			guardFunction{"repeat", repeat, []any{strings.Repeat}},
			guardFunction{"replace", replace, []any{strings.ReplaceAll, strings.Replace}})
	}()
)

// step is one iteration of a closure: (value, $env) -> value.
func step(args ...any) (any, error) {
	if b := budgetOf(args[1]); b != nil {
		if err := b.charge(1); err != nil {
			return nil, err
		}
	}
	return args[0], nil
}

// cost charges what a call or a + built: (value, $env) -> value.
func cost(args ...any) (any, error) {
	b := budgetOf(args[1])
	if b == nil {
		return args[0], nil
	}
	var units int
	switch v := args[0].(type) {
	case string:
		units = len(v) / bytesPerUnit
	case []any:
		units = len(v)
	case []string:
		units = len(v)
	case map[string]any:
		units = len(v)
	}
	if err := b.charge(uint(units)); err != nil {
		return nil, err
	}
	return args[0], nil
}

// fits reports whether n bytes of text may be built at all.
func fits(n int) bool { return n >= 0 && n/bytesPerUnit <= ExpressionBudget }

func repeat(args ...any) (any, error) {
	s, n := args[0].(string), toInt(args[1])
	if n < 0 {
		return nil, fmt.Errorf("repeat: the count must not be negative, got %d", n)
	}
	if len(s) > 0 && (n > ExpressionBudget*bytesPerUnit/len(s) || !fits(len(s)*n)) {
		return nil, errOverBudget
	}
	return strings.Repeat(s, n), nil
}

func replace(args ...any) (any, error) {
	s, old, new := args[0].(string), args[1].(string), args[2].(string)
	n := -1
	if len(args) == 4 {
		n = toInt(args[3])
	}
	matches := strings.Count(s, old)
	if n >= 0 && n < matches {
		matches = n
	}
	if grow := len(new) - len(old); grow > 0 && (matches > ExpressionBudget*bytesPerUnit/grow || !fits(len(s)+matches*grow)) {
		return nil, errOverBudget
	}
	return strings.Replace(s, old, new, n), nil
}

func toInt(v any) int {
	switch x := v.(type) {
	case int:
		return x
	case int64:
		return int(x)
	case float64:
		return int(x)
	}
	return 0
}

// guard is the patch: a closure's body becomes $step(body, $env); a +
// that may build text or a list, and a call that returns either, become
// $cost(node, $env).
type guard struct{}

func (guard) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.PredicateNode:
		n.Node = guarded(stepFns, n.Node)
	case *ast.BinaryNode:
		// A + with a number on either side adds numbers: it builds nothing.
		if n.Operator == "+" && !isNumber(n.Left) && !isNumber(n.Right) {
			*node = guarded(costFns, n)
		}
	case *ast.BuiltinNode:
		*node = guarded(costFns, n)
	case *ast.CallNode:
		if id, ok := n.Callee.(*ast.IdentifierNode); !ok || !strings.HasPrefix(id.Value, "$") {
			*node = guarded(costFns, n)
		}
	}
}

func isNumber(n ast.Node) bool {
	t := n.Type()
	if t == nil {
		return false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// guarded is node passed through the function of names for its type, or
// node itself when its type needs no guard.
func guarded(names map[reflect.Type]string, node ast.Node) ast.Node {
	t := node.Type()
	if t == nil {
		t = reflect.TypeFor[any]()
	}
	name, ok := names[t]
	if !ok {
		return node
	}
	call := &ast.CallNode{Callee: &ast.IdentifierNode{Value: name}, Arguments: []ast.Node{node, &ast.IdentifierNode{Value: "$env"}}}
	call.SetLocation(node.Location())
	return call
}

// limitError is the LimitError that stopped an evaluation, if one did.
func limitError(err error, message string) error {
	var le *LimitError
	switch {
	case errors.As(err, &le):
		return le
	case message == vmBudgetMessage:
		return errOverBudget
	}
	return nil
}
