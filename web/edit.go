package web

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/eventview"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/store"
)

// The edit form: one field per state variable ("set.NAME") and, for a
// fork, per input ("input.NAME"), each holding its value at the
// checkpoint the run goes on from. What the person changed becomes an
// edit, read and checked by the engine as `flowrun resume --set` reads
// one.

// typeOfState is the form type of a state variable's values.
func typeOfState(t *dsl.Type) string {
	switch t.Kind {
	case dsl.TypeBool:
		return "boolean"
	case dsl.TypeInt:
		return "integer"
	case dsl.TypeFloat:
		return "number"
	case dsl.TypeString:
		return "string"
	case dsl.TypeList:
		return "array"
	case dsl.TypeObject:
		return "object"
	}
	return "json"
}

// editFields are the form's fields for p's state variables, as state
// holds them, and (when inputs is not nil) its inputs.
func editFields(p *dsl.Pipeline, state, inputs map[string]any) (states, ins []field) {
	long := func(typ, v string) bool {
		return typ == "array" || typ == "object" || typ == "json" || len(v) > 60 || strings.Contains(v, "\n")
	}
	for _, v := range p.State {
		f := field{Name: "set." + v.Name, Label: "state." + v.Name, Type: typeOfState(v.Type), Value: dsl.Stringify(state[v.Name])}
		f.Long = long(f.Type, f.Value)
		states = append(states, f)
	}
	if inputs == nil {
		return states, nil
	}
	for _, in := range p.Inputs {
		f := field{Name: "input." + in.Name, Label: "inputs." + in.Name, Type: in.Type, Description: in.Description, Value: dsl.Stringify(inputs[in.Name])}
		f.Enum, _ = enumAndDefault(in.Schema, nil, false)
		f.Long = f.Enum == nil && long(f.Type, f.Value)
		ins = append(ins, f)
	}
	return states, ins
}

// formEdits are the edits the form asks for: each field whose value
// differs from the one it was shown with, as state.NAME=VALUE or
// inputs.NAME=VALUE.
func formEdits(r *http.Request, p *dsl.Pipeline, state, inputs map[string]any) []string {
	var out []string
	for _, v := range p.State {
		if got, ok := r.PostForm["set."+v.Name]; ok && !unchanged(got[0], state[v.Name]) {
			out = append(out, "state."+v.Name+"="+got[0])
		}
	}
	for _, in := range p.Inputs {
		if got, ok := r.PostForm["input."+in.Name]; ok && !unchanged(got[0], inputs[in.Name]) {
			out = append(out, "inputs."+in.Name+"="+got[0])
		}
	}
	return out
}

// unchanged says whether text is how the form showed v, or v written as
// JSON another way (a reformatted textarea).
func unchanged(text string, v any) bool {
	if text == dsl.Stringify(v) {
		return true
	}
	x, err := jsonvalue.Decode([]byte(text))
	return err == nil && eventview.SameValue(x, v)
}

// editsFor reads the edit fields of r, a form about run going on from
// checkpoint ref (its last when ref is ""), into edits.
func (s *Server) editsFor(r *http.Request, run *store.Run, ref string) ([]string, error) {
	if !hasEditFields(r) {
		return nil, nil
	}
	p, ds := engine.Recorded(run)
	if p == nil {
		return nil, fmt.Errorf("run %s: its pipeline no longer loads:\n%s", run.ID, ds)
	}
	var upTo int64
	if ref != "" {
		seq, err := s.st.Point(r.Context(), run.ID, ref)
		if err != nil {
			return nil, err
		}
		upTo = seq
	}
	points, err := s.st.Checkpoints(r.Context(), run.ID, upTo)
	if err != nil {
		return nil, err
	}
	if ref != "" && upTo == 0 {
		points = nil
	}
	return formEdits(r, p, eventview.StateAfter(p, points), run.Inputs), nil
}

func hasEditFields(r *http.Request) bool {
	for k := range r.PostForm {
		if strings.HasPrefix(k, "set.") || strings.HasPrefix(k, "input.") {
			return true
		}
	}
	return false
}

// normaliseLineBreaks writes every posted field's line breaks as \n.
// Browsers send a textarea's line breaks as \r\n, as HTML's form rules
// say, while the page showed the value with \n: read as sent, a field
// nobody touched would come back as an edit (and a value given for an
// input would differ from the same text given on the command line).
func normaliseLineBreaks(r *http.Request) {
	if r.Form == nil {
		// A request whose form could not be read: its handler reads it
		// again and says why.
		_ = r.ParseMultipartForm(maxUpload)
	}
	forms := []map[string][]string{r.Form, r.PostForm}
	if r.MultipartForm != nil {
		forms = append(forms, r.MultipartForm.Value)
	}
	for _, form := range forms {
		for _, vs := range form {
			for i, v := range vs {
				if strings.ContainsRune(v, '\r') {
					vs[i] = strings.ReplaceAll(strings.ReplaceAll(v, "\r\n", "\n"), "\r", "\n")
				}
			}
		}
	}
}
