// Package secret is the one rule for which values a run of a pipeline
// must never show: each model's API key and base URL password, and the
// values of the env: names that say they are secret. Register hands them
// to package redact before anything runs, so that no event, checkpoint,
// trace or message of the run holds them.
package secret

import (
	"strings"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/redact"
)

// Register tells package redact the secrets a run of p may meet, in p and
// in the pipelines it calls, reading the environment through lookupEnv.
func Register(p *dsl.Pipeline, lookupEnv func(string) (string, bool)) {
	seen := map[*dsl.Pipeline]bool{}
	add := func(q *dsl.Pipeline) {
		if seen[q] {
			return
		}
		seen[q] = true
		for _, m := range q.Models {
			redact.Add(llm.Secrets(m, lookupEnv)...)
		}
		for _, name := range q.Env {
			if Name(name) {
				if v, ok := lookupEnv(name); ok {
					redact.Add(v)
				}
			}
		}
	}
	add(p)
	dsl.Walk(p, func(q *dsl.Pipeline, _ *dsl.Node) { add(q) })
}

// Name says whether an environment variable's name marks its value as a
// secret.
func Name(name string) bool {
	up := strings.ToUpper(name)
	for _, word := range []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "PRIVATE"} {
		if strings.Contains(up, word) {
			return true
		}
	}
	return false
}
