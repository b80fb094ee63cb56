package llm

import (
	"fmt"
	"strings"

	"github.com/flowrun/flowrun/codefence"
	"github.com/flowrun/flowrun/jsonvalue"
)

// strictSchema returns a copy of schema fit for OpenAI's strict mode as far
// as that needs no change of meaning for the caller: every object schema
// that does not say otherwise gets additionalProperties: false. The copy is
// what is sent and what replies are validated against.
func strictSchema(schema map[string]any) map[string]any {
	return strictNode(schema)
}

func strictNode(x map[string]any) map[string]any {
	out := make(map[string]any, len(x)+1)
	for k, sub := range x {
		switch k {
		case "properties", "$defs", "definitions", "patternProperties", "dependentSchemas":
			if m, ok := sub.(map[string]any); ok {
				schemas := make(map[string]any, len(m))
				for name, s := range m {
					schemas[name] = strictAny(s)
				}
				out[k] = schemas
				continue
			}
		case "items", "additionalProperties", "not", "if", "then", "else", "contains",
			"propertyNames", "unevaluatedProperties", "unevaluatedItems", "additionalItems",
			"anyOf", "allOf", "oneOf", "prefixItems":
			out[k] = strictAny(sub)
			continue
		}
		out[k] = sub
	}
	if _, hasProps := x["properties"]; hasProps || x["type"] == "object" {
		if _, set := x["additionalProperties"]; !set {
			out["additionalProperties"] = false
		}
	}
	return out
}

// strictAny handles a schema, a boolean schema or a list of schemas.
func strictAny(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return strictNode(x)
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = strictAny(x[i])
		}
		return out
	}
	return v
}

// parseStructured parses a structured reply and validates it. The error is
// what the model is told in a repair turn.
func parseStructured(text string, schema map[string]any) (any, error) {
	body := strings.TrimSpace(text)
	if body == "" {
		return nil, fmt.Errorf("the reply is empty, not JSON")
	}
	v, err := jsonvalue.Decode([]byte(body))
	if err != nil {
		// Some compatible servers wrap JSON in a code fence despite the
		// response format.
		if code := codefence.BlockOrText(body, "json"); code != body {
			if v2, err2 := jsonvalue.Decode([]byte(code)); err2 == nil {
				v, err = v2, nil
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the reply is not valid JSON: %v", err)
	}
	if err := jsonvalue.Validate(schema, v); err != nil {
		return nil, fmt.Errorf("the reply does not match the schema: %v", err)
	}
	return v, nil
}

// repairPrompt is the user turn that asks the model to fix its reply.
func repairPrompt(problem error) string {
	return "Your previous reply was rejected: " + problem.Error() +
		".\nReply again with only a JSON value that matches the required schema."
}
