package promptfoo

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// promptScript is a prompt written as a Python function,
// file://FILE.py:FN, which promptfoo calls with {vars, provider} and
// whose return value is the prompt. The pipeline runs it in the sandbox
// in a code node before the model call, from a copy of FILE written
// beside the pipelines.
type promptScript struct {
	at     *yaml.Node
	name   string // as the configuration names it
	file   string // the copy's name, beside the pipelines
	fn     string
	source []byte
}

var pythonNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// promptError is the output that says why a prompt function failed.
const promptError = "prompt_error"

// returned picks what a prompt function's result holds, as promptfoo
// reads it: a text, a list of messages, or {prompt: either}.
const returned = `let r = nodes.prompt.result; let p = type(r) == "map" && "prompt" in r ? r.prompt : r; `

// nodes are the pipeline's nodes for the script: the code node that
// calls the function with promptfoo's context, then the model call,
// made only when the function returned. A text is the prompt; a list of
// messages gives the system (its system messages) and the prompt (the
// other messages' contents, joined by blank lines); anything else is
// sent as its JSON text, as promptfoo sends it.
func (s *promptScript) nodes(vars []string, provider string) []nodeDoc {
	fields := make([]string, len(vars))
	for i, v := range vars {
		fields[i] = fmt.Sprintf("%q: inputs.%s", v, v)
	}
	context := fmt.Sprintf(`{"vars": {%s}, "provider": {"id": %q}}`, strings.Join(fields, ", "), provider)
	return []nodeDoc{
		{ID: "prompt", Code: &codeDoc{Language: "python", Source: map[string]string{"file": s.file}, Call: s.fn, Args: []string{context}}},
		{ID: "answer", When: "nodes.prompt.ok", LLM: &llmDoc{
			System: "${{ " + returned + `type(p) == "array" ? join(map(filter(p, .role == "system"), .content), "\n\n") : "" }}`,
			Prompt: "${{ " + returned + `type(p) == "string" ? p : type(p) == "array" ? join(map(filter(p, .role != "system"), .content), "\n\n") : toJSON(p) }}`,
		}},
	}
}

// scriptVars gives each prompt function the vars every test gives (its
// context.vars), listing those only some tests give, and says how the
// function's prompt is sent. Files gets each script's copy.
func (c *converter) scriptVars(prompts []prompt, tests []test, providers []modelDoc, files map[string][]byte) {
	counts := map[string]int{}
	for _, t := range tests {
		for name := range t.vars {
			counts[name]++
		}
	}
	var every, some []string
	for name, n := range counts {
		switch {
		case !pythonNameRE.MatchString(name):
			some = append(some, name)
		case n == len(tests):
			every = append(every, name)
		default:
			some = append(some, name)
		}
	}
	sort.Strings(every)
	sort.Strings(some)
	copies := map[string]string{} // copy's name -> the script it holds
	for i := range prompts {
		s := prompts[i].script
		if s == nil {
			continue
		}
		c.promptFunctions = true
		prompts[i].vars = every
		base := strings.TrimSuffix(s.file, ".py")
		for k := 2; copies[s.file] != "" && copies[s.file] != string(s.source); k++ {
			s.file = fmt.Sprintf("%s_%d.py", base, k)
		}
		copies[s.file] = string(s.source)
		files[s.file] = s.source
		c.problem(s.at, "prompt %s: converted approximately: the function runs in the sandbox (flowrun sandbox install python) from the copy %s, with the standard library and numpy; what it returns is sent as promptfoo sends it (a text, or messages: the system messages as the system, the others' contents joined by blank lines), but a returned text is not rendered again as a Nunjucks template with the vars", s.name, s.file)
		if len(some) > 0 {
			c.problem(s.at, "prompt %s: vars %s are given by only some tests (or are not Python names): not passed to the function in context.vars", s.name, strings.Join(some, ", "))
		}
		if len(providers) > 1 {
			c.problem(s.at, "prompt %s: context.provider.id is %s, the first provider's, in every run, also one that swaps in another model with --model", s.name, providers[0].id)
		}
	}
}

// dropScripts removes the prompt functions when the pipelines call an
// HTTP endpoint, whose request is built from a prompt text.
func (c *converter) dropScripts(prompts []prompt) []prompt {
	return slices.DeleteFunc(prompts, func(p prompt) bool {
		if p.script != nil {
			c.problem(p.script.at, "prompt %s: not converted: a prompt function for an HTTP endpoint is not", p.script.name)
		}
		return p.script != nil
	})
}
