package dsl

import (
	"fmt"
	"strings"

	"github.com/flowrun/flowrun/jsonvalue"
	"gopkg.in/yaml.v3"
)

// Merge says how writes to a state variable combine, as LangGraph's
// reducers do. With a merge, every set: of the variable gives an update
// that is combined with the current value; without one, a write replaces
// the value, and the validator refuses writes that could race (two
// parallel branches, or map items).
type Merge string

const (
	MergeNone    Merge = ""
	MergeAppend  Merge = "append"  // add the update as one element of the list
	MergeExtend  Merge = "extend"  // add the update's elements to the list
	MergeSum     Merge = "sum"     // add the update to the number
	MergeMax     Merge = "max"     // keep the larger number
	MergeMin     Merge = "min"     // keep the smaller number
	MergeReplace Merge = "replace" // the last write wins, in declaration (item) order
)

var merges = []Merge{MergeAppend, MergeExtend, MergeSum, MergeMax, MergeMin, MergeReplace}

func mergeNames() string {
	names := make([]string, len(merges))
	for i, m := range merges {
		names[i] = string(m)
	}
	return strings.Join(names, ", ")
}

// Apply combines the current value with an update. It never loses a
// write: an update of an unexpected shape is kept as well as it can be
// (appended to a list, or replacing a value that is not a number).
func (m Merge) Apply(cur, update any) any {
	switch m {
	case MergeAppend, MergeExtend:
		list, _ := cur.([]any)
		out := make([]any, len(list), len(list)+1)
		copy(out, list)
		if more, ok := update.([]any); ok && m == MergeExtend {
			return append(out, more...)
		}
		return append(out, update)
	case MergeSum, MergeMax, MergeMin:
		a, aok := jsonvalue.Number(cur)
		b, bok := jsonvalue.Number(update)
		if !aok || !bok {
			if aok && update == nil {
				return cur
			}
			return update
		}
		var r float64
		switch m {
		case MergeSum:
			r = a + b
		case MergeMax:
			r = max(a, b)
		default:
			r = min(a, b)
		}
		_, ai := cur.(int)
		_, bi := update.(int)
		if ai && bi {
			return int(r)
		}
		return r
	}
	return update
}

// MergeOf is how writes to the state variable key combine.
func (p *Pipeline) MergeOf(key string) Merge {
	if p.merges == nil {
		return MergeNone
	}
	return p.merges[key]
}

// HasMerges reports whether any state variable declares a merge.
func (p *Pipeline) HasMerges() bool { return p.merges != nil }

// Join combines what a parallel branch or map item did to a variable
// with the current value: branch is the variable's value in the branch,
// base its value when the branch began.
func (m Merge) Join(cur, base, branch any) any {
	switch m {
	case MergeAppend, MergeExtend:
		b, _ := base.([]any)
		br, _ := branch.([]any)
		if len(br) < len(b) {
			return cur
		}
		return MergeExtend.Apply(cur, br[len(b):])
	case MergeSum:
		x, xok := jsonvalue.Number(base)
		y, yok := jsonvalue.Number(branch)
		if !xok || !yok {
			return m.Apply(cur, branch)
		}
		_, bi := base.(int)
		_, bri := branch.(int)
		if bi && bri {
			return m.Apply(cur, branch.(int)-base.(int))
		}
		return m.Apply(cur, y-x)
	case MergeMax, MergeMin:
		return m.Apply(cur, branch)
	}
	return branch
}

// updateType is the type a set: of a variable with merge m gives, for a
// variable of type t.
func (m Merge) updateType(t *Type) *Type {
	switch m {
	case MergeAppend:
		if t.Kind == TypeList {
			return t.Elem
		}
		return AnyType
	case MergeSum, MergeMax, MergeMin:
		return FloatType
	}
	return t
}

// stateDecl reads a state entry: an initial value, or a declaration
// {default, merge, schema} when the mapping has merge: or schema:.
func (f *file) stateDecl(name string, v *yaml.Node) StateVar {
	sv := StateVar{Name: name}
	m, isMap := Plain(v).(map[string]any)
	_, hasMerge := m["merge"]
	_, hasSchema := m["schema"]
	if !isMap || (!hasMerge && !hasSchema) {
		f.checkLiteral(v, fmt.Sprintf("state %q", name))
		sv.Initial = Plain(v)
		sv.Type = stateType(sv.Initial)
		return sv
	}
	for k := range m {
		if k != "default" && k != "merge" && k != "schema" {
			kn, _ := get(v, k)
			f.l.errorf(f.pos(kn), "state %q: a declaration with merge: or schema: takes default, merge and schema, not %q (to start from a mapping, write it under default:)", name, k)
		}
	}
	if dn := valueOf(v, "default"); dn != nil {
		f.checkLiteral(dn, fmt.Sprintf("state %q: default", name))
	}
	sv.Initial = m["default"]
	sv.Type = stateType(sv.Initial)
	if s, ok := m["schema"].(map[string]any); ok {
		sv.Schema = s
		sv.Type = TypeFromSchema(s)
		if sch := f.checkJSONSchema(valueOf(v, "schema"), fmt.Sprintf("state %q: schema", name), s); sch != nil {
			if err := sch.Validate(sv.Initial); err != nil {
				f.l.errorf(f.pos(v), "state %q: default does not match its schema: %v", name, err)
			}
		}
	}
	if hasMerge {
		mn := valueOf(v, "merge")
		s, _ := str(mn)
		sv.Merge = Merge(s)
		known := false
		for _, k := range merges {
			known = known || k == sv.Merge
		}
		if !known {
			f.l.errorf(f.pos(mn), "state %q: merge %q is not one of %s%s", name, s, mergeNames(), Suggest(s, strings.Split(mergeNames(), ", ")))
			sv.Merge, sv.Type = MergeReplace, AnyType // reported once, not again at every set:
		}
		if (sv.Merge == MergeAppend || sv.Merge == MergeExtend) && sv.Initial == nil {
			sv.Initial = []any{}
			sv.Type = ListOf(AnyType)
		}
	}
	return sv
}
