package dsl

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// strictUnsupported are the JSON-schema keywords OpenAI's strict
// structured output refuses; a schema using one fails every request.
var strictUnsupported = []string{
	"allOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas",
	"patternProperties", "unevaluatedProperties", "propertyNames", "minProperties", "maxProperties",
	"unevaluatedItems", "contains", "minContains", "maxContains", "uniqueItems",
}

// strictProblems lists why OpenAI's strict mode would refuse an
// output_schema, each with its fix. flowrun adds additionalProperties:
// false where a schema does not say (documented); everything else it
// leaves to the author rather than change what the schema means.
func strictProblems(schema map[string]any) []string {
	if schema == nil {
		return nil
	}
	var out []string
	if t, _ := schema["type"].(string); t != "object" {
		out = append(out, "the root must be an object (type: object with properties): strict structured output returns an object; wrap the value in a property")
	}
	strictWalk(schema, "", &out)
	return out
}

func strictWalk(s map[string]any, at string, out *[]string) {
	where := func() string {
		if at == "" {
			return "the schema"
		}
		return at
	}
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if slices.Contains(strictUnsupported, k) {
			*out = append(*out, fmt.Sprintf("%s uses %s, which strict mode does not support: remove it and check the value in a later node", where(), k))
		}
	}
	if props, ok := s["properties"].(map[string]any); ok {
		if ap, set := s["additionalProperties"]; set && ap != false {
			*out = append(*out, fmt.Sprintf("%s allows additionalProperties, which strict mode does not: remove it (flowrun sends additionalProperties: false)", where()))
		}
		required := map[string]bool{}
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if name, ok := r.(string); ok {
					required[name] = true
				}
			}
		}
		var missing []string
		for _, name := range keysOf(props) {
			if !required[name] {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			*out = append(*out, fmt.Sprintf("%s: strict mode needs every property in required; add %s (to make one optional, give it type [T, \"null\"])", where(), strings.Join(missing, ", ")))
		}
		for _, name := range keysOf(props) {
			if sub, ok := props[name].(map[string]any); ok {
				strictWalk(sub, joinPath(at, name), out)
			}
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		strictWalk(items, joinPath(at, "items"), out)
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[key].([]any); ok {
			for i, a := range alts {
				if sub, ok := a.(map[string]any); ok {
					strictWalk(sub, fmt.Sprintf("%s[%d]", joinPath(at, key), i), out)
				}
			}
		}
	}
}

func joinPath(at, name string) string {
	if at == "" {
		return name
	}
	return at + "." + name
}
