package secret

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/redact"
)

func TestName(t *testing.T) {
	for name, want := range map[string]bool{"SERVICE_TOKEN": true, "db_password": true, "GITHUB_AUTH": true, "API_KEY": true,
		"PRIVATE_PEM": true, "HOME": false, "REGION": false, "MODEL_NAME": false} {
		if got := Name(name); got != want {
			t.Errorf("Name(%q) = %v, want %v", name, got, want)
		}
	}
}

// Register hides the secret env: values of a pipeline and of the
// pipelines it calls, and a model's key from its api_key_env; an env:
// value whose name says nothing of secrecy stays readable.
func TestRegister(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write("callee.yaml", `
version: 1
name: callee
env: [CALLEE_TOKEN]
nodes:
  - id: a
    set: {}
outputs: {t: env.CALLEE_TOKEN}
`)
	p, ds := dsl.Load(write("caller.yaml", `
version: 1
name: caller
env: [SERVICE_PASSWORD, REGION]
models:
  default: {model: gpt-4.1-mini, api_key_env: CALLER_MODEL_KEY}
nodes:
  - id: c
    call: {pipeline: callee.yaml}
outputs: {r: env.REGION}
`))
	if p == nil {
		t.Fatal(ds)
	}
	env := map[string]string{
		"SERVICE_PASSWORD": "pw-register-0a1b2c3d4e5f6789",
		"CALLEE_TOKEN":     "tok-register-9f8e7d6c5b4a3210",
		"CALLER_MODEL_KEY": "sk-register-00112233445566778899",
		"REGION":           "eu-west-1-plain-region-name",
	}
	Register(p, func(name string) (string, bool) { v, ok := env[name]; return v, ok })
	for name, v := range env {
		shown := redact.String("value: " + v)
		if hidden := !strings.Contains(shown, v); hidden != (name != "REGION") {
			t.Errorf("%s: shown as %q", name, shown)
		}
	}
}
