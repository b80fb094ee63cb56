package dsl

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/expr-lang/expr/types"
)

// TypeKind is the kind of a static type.
type TypeKind uint8

const (
	TypeAny TypeKind = iota // unknown: anything goes, checked when it runs
	TypeNull
	TypeBool
	TypeInt
	TypeFloat
	TypeString
	TypeList
	TypeObject
)

// Type is the shape of a value as far as the validator knows it. Types are
// built once at load and never change; they are shared freely.
type Type struct {
	Kind TypeKind
	// Elem is a list's element type.
	Elem *Type
	// Fields are an object's known fields, sorted by name.
	Fields []TypeField
	// Open says an object may hold fields beyond Fields (of type Extra,
	// or any). A closed object rejects any other field at load.
	Open  bool
	Extra *Type
}

// TypeField is one named field of an object type.
type TypeField struct {
	Name string
	Type *Type
}

// The scalar types.
var (
	AnyType    = &Type{Kind: TypeAny}
	NullType   = &Type{Kind: TypeNull}
	BoolType   = &Type{Kind: TypeBool}
	IntType    = &Type{Kind: TypeInt}
	FloatType  = &Type{Kind: TypeFloat}
	StringType = &Type{Kind: TypeString}
)

// ListOf is the type of a list whose elements have type elem.
func ListOf(elem *Type) *Type { return &Type{Kind: TypeList, Elem: elem} }

// Object is a closed object type with the given fields.
func Object(fields map[string]*Type) *Type {
	t := &Type{Kind: TypeObject}
	for name, ft := range fields {
		t.Fields = append(t.Fields, TypeField{Name: name, Type: ft})
	}
	sort.Slice(t.Fields, func(i, j int) bool { return t.Fields[i].Name < t.Fields[j].Name })
	return t
}

// OpenObject is an object type with known fields that may hold others.
func OpenObject(fields map[string]*Type, extra *Type) *Type {
	t := Object(fields)
	t.Open, t.Extra = true, extra
	return t
}

// Field returns the type of an object's field, and whether the field may
// exist at all. Anything may be read from a value of unknown type.
func (t *Type) Field(name string) (*Type, bool) {
	switch {
	case t == nil || t.Kind == TypeAny:
		return AnyType, true
	case t.Kind != TypeObject:
		return nil, false
	}
	i, found := slices.BinarySearchFunc(t.Fields, name, func(f TypeField, n string) int { return strings.Compare(f.Name, n) })
	if found {
		return t.Fields[i].Type, true
	}
	if t.Open {
		if t.Extra != nil {
			return t.Extra, true
		}
		return AnyType, true
	}
	return nil, false
}

// FieldNames lists an object's known fields.
func (t *Type) FieldNames() []string {
	names := make([]string, len(t.Fields))
	for i, f := range t.Fields {
		names[i] = f.Name
	}
	return names
}

// String writes the type the way diagnostics show it.
func (t *Type) String() string {
	if t == nil {
		return "any"
	}
	switch t.Kind {
	case TypeNull:
		return "null"
	case TypeBool:
		return "bool"
	case TypeInt:
		return "integer"
	case TypeFloat:
		return "number"
	case TypeString:
		return "string"
	case TypeList:
		return "list of " + t.Elem.String()
	case TypeObject:
		parts := make([]string, 0, len(t.Fields)+1)
		for _, f := range t.Fields {
			parts = append(parts, f.Name+": "+f.Type.String())
		}
		if t.Open {
			parts = append(parts, "...")
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return "any"
}

// numeric reports whether t is a number type.
func (t *Type) numeric() bool { return t.Kind == TypeInt || t.Kind == TypeFloat }

// Accepts reports whether a value of type v can be used where t is
// expected. Unknown types are accepted both ways; an int is a number.
func (t *Type) Accepts(v *Type) bool {
	switch {
	case t == nil || v == nil || t.Kind == TypeAny || v.Kind == TypeAny:
		return true
	case v.Kind == TypeNull:
		// null is checked against schemas when the value exists.
		return true
	case t.numeric() && v.numeric():
		// Numbers from JSON and YAML are int or float as they happen
		// to be written; either may stand for the other.
		return true
	case t.Kind != v.Kind:
		return false
	case t.Kind == TypeList:
		return t.Elem.Accepts(v.Elem)
	case t.Kind == TypeObject:
		for _, f := range v.Fields {
			ft, ok := t.Field(f.Name)
			if !ok || !ft.Accepts(f.Type) {
				return false
			}
		}
		return true
	}
	return true
}

// Join is the type of a value that is either a or b.
func Join(a, b *Type) *Type {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.Kind == TypeNull:
		return b
	case b.Kind == TypeNull:
		return a
	case a.Kind == TypeAny || b.Kind == TypeAny:
		return AnyType
	case a.numeric() && b.numeric():
		if a.Kind == b.Kind {
			return a
		}
		return FloatType
	case a.Kind != b.Kind:
		return AnyType
	case a.Kind == TypeList:
		return ListOf(Join(a.Elem, b.Elem))
	case a.Kind == TypeObject:
		fields := map[string]*Type{}
		for _, f := range a.Fields {
			fields[f.Name] = f.Type
		}
		for _, f := range b.Fields {
			if prev, ok := fields[f.Name]; ok {
				fields[f.Name] = Join(prev, f.Type)
			} else {
				fields[f.Name] = f.Type
			}
		}
		out := Object(fields)
		out.Open = a.Open || b.Open
		return out
	}
	return a
}

// TypeOfValue is the type of a literal value from the file.
func TypeOfValue(v any) *Type {
	switch x := v.(type) {
	case nil:
		return NullType
	case bool:
		return BoolType
	case int, int64:
		return IntType
	case float64:
		return FloatType
	case string:
		return StringType
	case []any:
		var elem *Type
		for _, e := range x {
			elem = Join(elem, TypeOfValue(e))
		}
		if elem == nil || elem.Kind == TypeNull {
			elem = AnyType
		}
		return ListOf(elem)
	case map[string]any:
		fields := make(map[string]*Type, len(x))
		for k, e := range x {
			fields[k] = TypeOfValue(e)
			if fields[k].Kind == TypeNull {
				fields[k] = AnyType
			}
		}
		return Object(fields)
	}
	return AnyType
}

// stateType is the type a state variable gets from its initial value. A
// state variable often starts empty and is filled later, so null is any
// type, and objects keep the fields they start with but may gain others.
func stateType(initial any) *Type {
	t := TypeOfValue(initial)
	switch t.Kind {
	case TypeNull:
		return AnyType
	case TypeObject:
		t.Open = true
	}
	return t
}

// TypeFromSchema is the type of the values a JSON schema accepts. An object
// schema that lists properties is closed unless additionalProperties
// allows more: a field the schema does not name is a typo far more often
// than a real extra field.
func TypeFromSchema(schema map[string]any) *Type {
	if schema == nil {
		return AnyType
	}
	if c, ok := schema["const"]; ok {
		return TypeOfValue(c)
	}
	if e, ok := schema["enum"].([]any); ok && len(e) > 0 {
		var t *Type
		for _, v := range e {
			t = Join(t, TypeOfValue(v))
		}
		return t
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if alts, ok := schema[key].([]any); ok && len(alts) > 0 {
			var t *Type
			for _, a := range alts {
				m, _ := a.(map[string]any)
				t = Join(t, TypeFromSchema(m))
			}
			return t
		}
	}
	switch ty := schema["type"].(type) {
	case string:
		return typeFromSchemaType(ty, schema)
	case []any:
		var t *Type
		for _, x := range ty {
			if s, ok := x.(string); ok {
				t = Join(t, typeFromSchemaType(s, schema))
			}
		}
		if t == nil {
			return AnyType
		}
		return t
	}
	if _, ok := schema["properties"]; ok {
		return typeFromSchemaType("object", schema)
	}
	return AnyType
}

func typeFromSchemaType(ty string, schema map[string]any) *Type {
	switch ty {
	case "null":
		return NullType
	case "boolean":
		return BoolType
	case "integer":
		return IntType
	case "number":
		return FloatType
	case "string":
		return StringType
	case "array":
		items, _ := schema["items"].(map[string]any)
		return ListOf(TypeFromSchema(items))
	case "object":
		props, ok := schema["properties"].(map[string]any)
		if !ok {
			extra, _ := schema["additionalProperties"].(map[string]any)
			return OpenObject(nil, TypeFromSchema(extra))
		}
		fields := make(map[string]*Type, len(props))
		for name, p := range props {
			m, _ := p.(map[string]any)
			fields[name] = TypeFromSchema(m)
		}
		t := Object(fields)
		switch ap := schema["additionalProperties"].(type) {
		case bool:
			t.Open = ap
		case map[string]any:
			t.Open, t.Extra = true, TypeFromSchema(ap)
		}
		return t
	}
	return AnyType
}

// exprType converts a type for expr-lang's checker.
func (t *Type) exprType() types.Type {
	if t == nil {
		return types.Any
	}
	switch t.Kind {
	case TypeNull:
		return types.Nil
	case TypeBool:
		return types.Bool
	case TypeInt:
		return types.Int
	case TypeFloat:
		return types.Float64
	case TypeString:
		return types.String
	case TypeList:
		return types.Array(t.Elem.exprType())
	case TypeObject:
		m := make(types.Map, len(t.Fields)+1)
		for _, f := range t.Fields {
			m[f.Name] = f.Type.exprType()
		}
		if t.Open {
			m[types.Extra] = t.Extra.exprType()
		}
		return m
	}
	return types.Any
}

// describeKind names a type for "got X" in messages.
func describeKind(t *Type) string {
	switch t.Kind {
	case TypeList:
		return "a list"
	case TypeObject:
		return "an object"
	case TypeAny:
		return "any value"
	case TypeInt:
		return "an integer"
	case TypeNull:
		return "null"
	}
	return fmt.Sprintf("a %s", t)
}

// SchemaOf is a JSON schema that every value of t satisfies, for
// describing a pipeline's outputs to others (MCP clients).
func SchemaOf(t *Type) map[string]any {
	if t == nil {
		return map[string]any{}
	}
	switch t.Kind {
	case TypeNull:
		return map[string]any{"type": "null"}
	case TypeBool:
		return map[string]any{"type": "boolean"}
	case TypeInt:
		return map[string]any{"type": "integer"}
	case TypeFloat:
		return map[string]any{"type": "number"}
	case TypeString:
		return map[string]any{"type": "string"}
	case TypeList:
		return map[string]any{"type": "array", "items": SchemaOf(t.Elem)}
	case TypeObject:
		props := map[string]any{}
		for _, f := range t.Fields {
			props[f.Name] = SchemaOf(f.Type)
		}
		s := map[string]any{"type": "object", "properties": props}
		if !t.Open {
			s["additionalProperties"] = false
		}
		return s
	}
	return map[string]any{}
}
