// Package layers checks that the import graph follows the layers that
// docs/architecture.md lists: no package imports one in a layer above
// its own.
package layers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/flowrun/flowrun"

var (
	layerLine = regexp.MustCompile(`^(\d+)\. `)
	quoted    = regexp.MustCompile("`([a-z][a-z0-9/]*)`")
)

// parseLayers reads the numbered list under "## Layers": each item (its
// indented lines included) is a layer, and the backquoted package paths in
// it are its packages.
func parseLayers(doc string) (map[string]int, error) {
	_, section, ok := strings.Cut(doc, "\n## Layers\n")
	if !ok {
		return nil, errors.New(`no "## Layers" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	layers := map[string]int{}
	layer := 0
	for _, line := range strings.Split(section, "\n") {
		if m := layerLine.FindStringSubmatch(line); m != nil {
			fmt.Sscan(m[1], &layer)
		} else if line != "" && !strings.HasPrefix(line, " ") {
			layer = 0 // a paragraph, not an item's continuation
		}
		if layer == 0 {
			continue
		}
		for _, m := range quoted.FindAllStringSubmatch(line, -1) {
			if prev, dup := layers[m[1]]; dup && prev != layer {
				return nil, fmt.Errorf("package %s is in layers %d and %d", m[1], prev, layer)
			}
			layers[m[1]] = layer
		}
	}
	return layers, nil
}

// violations lists every import that runs up to a higher layer, and every
// package the layers do not place. imports maps a package (relative to
// the module) to the module packages it imports.
func violations(layers map[string]int, imports map[string][]string) []string {
	var out []string
	for pkg, deps := range imports {
		from, ok := layers[pkg]
		if !ok {
			out = append(out, fmt.Sprintf("package %s is in no layer of docs/architecture.md", pkg))
			continue
		}
		for _, dep := range deps {
			if to, ok := layers[dep]; ok && to > from {
				out = append(out, fmt.Sprintf("%s (layer %d) imports %s (layer %d), a layer above it", pkg, from, dep, to))
			}
		}
	}
	for pkg := range layers {
		if _, ok := imports[pkg]; !ok {
			out = append(out, fmt.Sprintf("docs/architecture.md places %s, which is not a package", pkg))
		}
	}
	sort.Strings(out)
	return out
}

// testHelpers are the packages that exist for tests: those that import
// package testing, those named after the package they help test as Go's
// own are (llm/llmtest, as net/http/httptest), and the packages under
// either.
func testHelpers(imports map[string][]string, usesTesting map[string]bool) map[string]bool {
	helpers := map[string]bool{}
	for pkg := range imports {
		parent, name := path.Split(pkg)
		if usesTesting[pkg] || name == path.Base(parent)+"test" {
			helpers[pkg] = true
		}
	}
	for pkg := range imports {
		for h := range helpers {
			if strings.HasPrefix(pkg, h+"/") {
				helpers[pkg] = true
			}
		}
	}
	return helpers
}

// helperImports lists every import of a test helper by a package that is
// not one: a helper linked into the product is a test double answering
// for something real.
func helperImports(imports map[string][]string, helpers map[string]bool) []string {
	var out []string
	for pkg, deps := range imports {
		if helpers[pkg] {
			continue
		}
		for _, dep := range deps {
			if helpers[dep] {
				out = append(out, fmt.Sprintf("%s imports the test helper %s: only tests and other test helpers may", pkg, dep))
			}
		}
	}
	sort.Strings(out)
	return out
}

// listed is what go list says of one package.
type listed struct {
	ImportPath, Dir string
	GoFiles         []string
	Imports         []string
}

// goList runs go list on the whole module.
func goList(t *testing.T, root string) []listed {
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			return pkgs
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
}

// moduleImports is each package's non-test imports within the module,
// and which packages import package testing.
func moduleImports(t *testing.T, root string) (imports map[string][]string, usesTesting map[string]bool) {
	imports, usesTesting = map[string][]string{}, map[string]bool{}
	for _, p := range goList(t, root) {
		pkg := strings.TrimPrefix(p.ImportPath, module+"/")
		imports[pkg] = []string{}
		for _, dep := range p.Imports {
			if rel, ok := strings.CutPrefix(dep, module+"/"); ok {
				imports[pkg] = append(imports[pkg], rel)
			}
			usesTesting[pkg] = usesTesting[pkg] || dep == "testing"
		}
	}
	return imports, usesTesting
}

func TestImportGraphFollowsTheLayers(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	layers, err := parseLayers(string(doc))
	if err != nil {
		t.Fatalf("docs/architecture.md: %v", err)
	}
	imports, _ := moduleImports(t, root)
	if len(imports) < 20 {
		t.Fatalf("go list found only %d packages", len(imports))
	}
	for _, v := range violations(layers, imports) {
		t.Error(v)
	}
}

// No production package imports a test helper: flowrun test, say, mocks
// models at the model client, not through llm/llmtest's fake server.
func TestProductionImportsNoTestHelper(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	imports, usesTesting := moduleImports(t, root)
	helpers := testHelpers(imports, usesTesting)
	for _, want := range []string{"llm/llmtest", "store/storetest", "internal/testneed"} {
		if !helpers[want] {
			t.Errorf("%s is not seen as a test helper", want)
		}
	}
	for _, v := range helperImports(imports, helpers) {
		t.Error(v)
	}
}

// A helper is found by name or by its import of testing, with what lies
// under it; flowtest, which tests pipelines, is no helper.
func TestHelperImportsAreReported(t *testing.T) {
	imports := map[string][]string{
		"llm": {}, "llm/llmtest": {"llm"}, "internal/testneed": {}, "internal/npmtest/install": {"internal/npmtest"},
		"internal/npmtest": {"internal/testneed"}, "flowtest": {"llm/llmtest"}, "web": {"flowtest", "internal/testneed"},
	}
	helpers := testHelpers(imports, map[string]bool{"internal/testneed": true, "internal/npmtest": true})
	got := helperImports(imports, helpers)
	want := []string{
		"flowtest imports the test helper llm/llmtest: only tests and other test helpers may",
		"web imports the test helper internal/testneed: only tests and other test helpers may",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("helper imports:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The check sees an arrow running back up, an unplaced package and a
// placed one that is gone.
func TestViolationsAreReported(t *testing.T) {
	layers, err := parseLayers("# x\n\n## Layers\n\n1. **Low**: `dsl`, `arc`.\n2. **High**: `web`,\n   `gone`.\n\nA paragraph on `dsl`.\n\n## Other\n\n1. `new`\n")
	if err != nil {
		t.Fatal(err)
	}
	got := violations(layers, map[string][]string{
		"dsl": {"arc", "web"}, "arc": {}, "web": {"dsl"}, "new": {"dsl"},
	})
	want := []string{
		"docs/architecture.md places gone, which is not a package",
		"dsl (layer 1) imports web (layer 2), a layer above it",
		"package new is in no layer of docs/architecture.md",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
