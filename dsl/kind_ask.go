package dsl

// KindAsk is the ask node kind.
const KindAsk Kind = "ask"

func init() {
	registerKind(&KindSpec{
		Kind:    KindAsk,
		Summary: "Ask the human a question and wait for the answer.",
		Doc:     "Asks the human `question` and waits for an answer matching `schema` (a string by default): at a terminal it asks there; otherwise the run pauses with status `waiting` until `flowrun resume RUN --answer ...`. With `--auto`, `default` is the answer.",
		Output:  "the answer, typed by `schema`.",
		Example: `- id: approve
  ask:
    question: "Ship it?"
    schema: {type: boolean}
    default: true`,
		Schema: `{
  "description": "Ask the human (on the terminal, or pause until \u0060flowrun resume --answer\u0060).",
  "type": "object",
  "additionalProperties": false,
  "required": [
    "question"
  ],
  "properties": {
    "question": {
      "$ref": "#/$defs/prompt",
      "description": "Question shown to the human."
    },
    "schema": {
      "description": "JSON schema the answer must satisfy.",
      "type": "object"
    },
    "default": {
      "description": "Answer used with \u0060--auto\u0060: a YAML value, not an expression.",
      "x-literal": true
    }
  }
}`,
		decode: decodeAsk,
		output: func(_ *resolver, n *Node) *Type {
			if a := n.Ask(); a.Schema != nil {
				return TypeFromSchema(a.Schema)
			}
			return StringType
		},
	})
}

// Ask asks the human.
type Ask struct {
	Question *Template
	Schema   map[string]any
	Default  any
}

// Ask is the configuration of a ask node; nil for a node of another kind.
func (n *Node) Ask() *Ask { return Config[*Ask](n) }

func decodeAsk(d *nodeDecoder) any {
	f, v := d.f, d.v
	a := &Ask{Schema: mapOf(valueOf(v, "schema"))}
	if q := valueOf(v, "question"); q != nil {
		a.Question = f.prompt(q, d.sc)
	}
	s := f.checkJSONSchema(valueOf(v, "schema"), d.label+": ask.schema", a.Schema)
	if _, dn := get(v, "default"); dn != nil {
		f.checkLiteral(dn, d.label+": ask.default")
		a.Default = Plain(dn)
		if s != nil {
			if err := s.Validate(a.Default); err != nil {
				f.l.errorf(f.pos(dn), "%s: ask.default does not match ask.schema: %v", d.label, err)
			}
		}
	}
	return a
}
