package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/flowrun/flowrun/errclass"
)

// TestUserWasmModule runs a module the user brings: args JSON on stdin,
// the result as JSON on stdout, its stderr kept.
func TestUserWasmModule(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain to build the test module")
	}
	dir := t.TempDir()
	src := `package main

import (
	"encoding/json"
	"fmt"
	"os"
)

func main() {
	var args []int
	if err := json.NewDecoder(os.Stdin).Decode(&args); err != nil {
		fmt.Fprintln(os.Stderr, "bad args:", err)
		os.Exit(2)
	}
	sum := 0
	for _, a := range args {
		sum += a
	}
	fmt.Fprintln(os.Stderr, "summing", len(args))
	json.NewEncoder(os.Stdout).Encode(map[string]int{"sum": sum})
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module m\n\ngo 1.22\n"), 0o644)
	mod := filepath.Join(dir, "sum.wasm")
	cmd := exec.Command("go", "build", "-o", mod, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the test module: %v\n%s", err, out)
	}
	s := New(Options{CacheDir: sharedCache(t)})
	defer s.Close()
	res, err := s.Run(context.Background(), Request{Language: Wasm, Module: mod, Args: []int{1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || res.Result.(map[string]any)["sum"] != 6 || res.Stderr != "summing 3\n" {
		t.Fatalf("%+v %+v", res, res.Error)
	}
	res, _ = s.Run(context.Background(), Request{Language: Wasm, Module: mod, Args: "not a list"})
	if res.OK || res.Error.Class != errclass.RuntimeError {
		t.Fatalf("a module exiting 2 is a runtime error: %+v", res)
	}
	bad := filepath.Join(dir, "bad.wasm")
	_ = os.WriteFile(bad, []byte("not wasm"), 0o644)
	res, _ = s.Run(context.Background(), Request{Language: Wasm, Module: bad})
	if res.OK || res.Error.Class != errclass.CompileError {
		t.Fatalf("a broken module is a compile error: %+v", res)
	}
}
