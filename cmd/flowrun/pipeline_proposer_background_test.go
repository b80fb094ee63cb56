package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// approach_proposer's stages run as background responses through a model
// override, with the outputs of the shipped run; a cassette recorded so
// replays offline with the same override.
func TestProposerInBackground(t *testing.T) {
	override := []string{"--auto", "--model", "default=,responses,background,poll=1ms"}
	want, err := os.ReadFile(filepath.Join("testdata", "shipped", "approach_proposer.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv := llmtest.New(t)
	srv.Handle(proposerModel)
	cassette := filepath.Join(t.TempDir(), "background.cassette.yaml")
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	t.Setenv("OPENAI_API_KEY", "sk-5e6f7a8b9c0d1e2f3a4b")
	code, stdout, stderr := flowrun(t, append([]string{proposerPipeline, "--record", cassette}, override...)...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	sameOutputs(t, stdout, want)
	reqs := srv.Requests()
	if srv.Creates() != len(reqs) || len(reqs) == 0 {
		t.Errorf("%d background responses created for %d requests: every stage should be one", srv.Creates(), len(reqs))
	}
	for _, r := range reqs {
		if r.Path != "/v1/responses" || r.Body["background"] != true {
			t.Fatalf("request %d to %s with background %v", r.N, r.Path, r.Body["background"])
		}
	}

	os.Unsetenv("OPENAI_BASE_URL")
	os.Unsetenv("OPENAI_API_KEY")
	code, stdout, stderr = flowrun(t, append([]string{proposerPipeline, "--replay", cassette}, override...)...)
	if code != exitOK {
		t.Fatalf("replay: exit %d\n%s", code, stderr)
	}
	sameOutputs(t, stdout, want)
}

func sameOutputs(t *testing.T, stdout string, want []byte) {
	t.Helper()
	var got, exp any
	if json.Unmarshal([]byte(stdout), &got) != nil || json.Unmarshal(want, &exp) != nil || !jsonEqual(got, exp) {
		t.Fatalf("outputs differ from the shipped run's:\n%s", stdout)
	}
}
