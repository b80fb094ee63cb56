package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHardening12CrossCompile builds flowrun and vets every package, tests
// included, for macOS and Windows, where `go install` must work too.
func TestHardening12CrossCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiling for two platforms takes a while: skipped with -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to cross-compile with")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []struct{ goos, goarch string }{{"darwin", "arm64"}, {"windows", "amd64"}} {
		t.Run(target.goos+"/"+target.goarch, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "flowrun")
			for _, args := range [][]string{
				{"build", "-o", bin, "./cmd/flowrun"},
				// vet type-checks every package and its tests for the
				// target, which is what a build of ./... would add.
				{"vet", "./..."},
			} {
				cmd := exec.Command(goTool, args...)
				cmd.Dir = root
				cmd.Env = append(os.Environ(), "GOOS="+target.goos, "GOARCH="+target.goarch, "CGO_ENABLED=0")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("GOOS=%s GOARCH=%s go %s: %v\n%s", target.goos, target.goarch, strings.Join(args, " "), err, out)
				}
			}
		})
	}
}
