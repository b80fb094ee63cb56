package layers

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// runStarters are what starts a run, records one or builds the services
// one runs with, outside the engine's Start, Resume, Fork, Answer and
// Continue: a package outside engine/ that uses one holds a run's life in
// its own hands, and must remember every guarantee the engine gives
// (secrets, tracing, the cassette fallback, the cache, the recorded spec).
var runStarters = []string{
	"runtime.Run", "nodes.Kinds", "llm.New", "sandbox.New",
	"engine.Runner",
}

// uses lists, for each Go file given, the runStarters it uses: selectors
// on an import of the module's package of that name, however the file
// names the import.
func uses(fset *token.FileSet, files []string) (map[string]bool, error) {
	want := map[string]bool{}
	for _, s := range runStarters {
		want[s] = true
	}
	out := map[string]bool{}
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		names := map[string]string{} // local name -> package, relative to the module
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			rel, ok := strings.CutPrefix(p, module+"/")
			if !ok {
				continue
			}
			local := filepath.Base(rel)
			if im.Name != nil {
				local = im.Name.Name
			}
			names[local] = filepath.Base(rel)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && names[x.Name] != "" {
				if name := names[x.Name] + "." + sel.Sel.Name; want[name] {
					out[name] = true
				}
			}
			return true
		})
	}
	return out, nil
}

// Runs start only through the engine: outside engine/, nothing starts,
// records or builds the services of a run.
// (The compiler keeps durable itself to the engine: it is internal.)
func TestRunsStartOnlyThroughTheEngine(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var problems []string
	for _, p := range goList(t, root) {
		pkg := strings.TrimPrefix(p.ImportPath, module+"/")
		if pkg == "engine" || strings.HasPrefix(pkg, "engine/") {
			continue
		}
		files := make([]string, len(p.GoFiles))
		for i, f := range p.GoFiles {
			files[i] = filepath.Join(p.Dir, f)
		}
		used, err := uses(fset, files)
		if err != nil {
			t.Fatal(err)
		}
		for name := range used {
			problems = append(problems, fmt.Sprintf("%s uses %s: start the run through package engine", pkg, name))
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}
