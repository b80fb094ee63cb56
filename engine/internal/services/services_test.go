package services

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/llm"
)

const modelPipeline = `version: 1
name: greeter
models:
  default: {model: gpt-4.1-mini}
nodes:
  - id: greet
    llm: {prompt: "Say hello"}
outputs: {text: nodes.greet.text}
`

// load writes body as dir/name and loads it.
func load(t *testing.T, dir, name, body string) *dsl.Pipeline {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	p, ds := dsl.Load(path)
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	return p
}

// noEnv is an environment with no key and no endpoint.
func noEnv(string) (string, bool) { return "", false }

// notices collects what a Session tells a person.
type notices []string

func (n *notices) add(format string, args ...any) { *n = append(*n, fmt.Sprintf(format, args...)) }

// TestOpenWithoutEndpoint: with no key and no endpoint, a pipeline that
// calls a model gets no Session unless it ships a cassette, which it then
// replays by absolute path, saying so once; a caller whose model calls
// happen elsewhere (NoEndpoint) gets its Session either way.
func TestOpenWithoutEndpoint(t *testing.T) {
	dir := t.TempDir()
	p := load(t, dir, "greeter.yaml", modelPipeline)
	if _, err := Open(p, Options{LookupEnv: noEnv}); !errors.Is(err, ErrNoEndpoint) {
		t.Fatalf("no endpoint and no cassette: %v, want ErrNoEndpoint", err)
	}
	s, err := Open(p, Options{LookupEnv: noEnv, NoEndpoint: true})
	if err != nil {
		t.Fatalf("NoEndpoint: %v", err)
	}
	s.End()
	if s.Replay != "" {
		t.Fatalf("NoEndpoint replays %s", s.Replay)
	}

	if err := llm.NewCassette().WriteFile(filepath.Join(dir, "greeter.cassette.yaml")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	var said notices
	rel, _ := dsl.Load("greeter.yaml")
	s, err = Open(rel, Options{LookupEnv: noEnv, Notice: said.add})
	if err != nil {
		t.Fatalf("with a cassette: %v", err)
	}
	s.End()
	if want := filepath.Join(dir, "greeter.cassette.yaml"); s.Replay != want {
		t.Errorf("replays %q, want %q (absolute, so a resume from elsewhere finds it)", s.Replay, want)
	}
	if len(said) != 1 || !strings.Contains(said[0], "replaying greeter.cassette.yaml (offline)") {
		t.Errorf("notices %q, want one saying it replays the cassette", said)
	}
}

// TestSharedSessionEndsOnce: a shared session outlives the runs that
// release it and writes its cassette at End; an unshared one ends as its
// run releases it.
func TestSharedSessionEndsOnce(t *testing.T) {
	dir := t.TempDir()
	p := load(t, dir, "greeter.yaml", modelPipeline)
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			to := filepath.Join(t.TempDir(), "recorded.yaml")
			var said notices
			s, err := Open(p, Options{LookupEnv: noEnv, NoEndpoint: true, RecordTo: to, Notice: said.add})
			if err != nil {
				t.Fatal(err)
			}
			s.Shared = shared
			s.Release()
			_, err = os.Stat(to)
			if written := err == nil; written == shared {
				t.Fatalf("after Release the cassette is written: %v", written)
			}
			if shared {
				s.End()
				if _, err := os.Stat(to); err != nil {
					t.Fatalf("End wrote no cassette: %v", err)
				}
			}
			if want := "recorded 0 model exchange(s) to " + to; len(said) != 1 || said[0] != want {
				t.Errorf("notices %q, want [%q]", said, want)
			}
		})
	}
}

// TestNeedsEndpoint: a model needs an endpoint only where the
// environment gives it neither a key nor a URL, after the --model
// overrides: --model default=echo runs offline, and an echo model sent to
// a server's model needs the server.
func TestNeedsEndpoint(t *testing.T) {
	dir := t.TempDir()
	server := load(t, dir, "greeter.yaml", modelPipeline)
	echo := load(t, dir, "echo.yaml", strings.Replace(modelPipeline, "{model: gpt-4.1-mini}", "{provider: echo}", 1))
	for _, c := range []struct {
		p         *dsl.Pipeline
		overrides map[string]string
		env       map[string]string
		want      bool
	}{
		{server, nil, nil, true},
		{server, nil, map[string]string{"OPENAI_API_KEY": "sk-test"}, false},
		{server, nil, map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, false},
		{server, map[string]string{"default": "echo"}, nil, false},
		{server, map[string]string{"other": "echo"}, nil, true},
		{echo, nil, nil, false},
		{echo, map[string]string{"default": "gpt-4.1"}, nil, true},
	} {
		lookup := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
		if got := NeedsEndpoint(c.p, c.overrides, lookup); got != c.want {
			t.Errorf("%s with overrides %v, environment %v: NeedsEndpoint %v, want %v", filepath.Base(c.p.Path), c.overrides, c.env, got, c.want)
		}
	}
}
