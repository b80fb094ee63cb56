// Command gen writes the files generated from the dsl package's specs and
// its expression functions: schemas/pipeline.schema.json and
// docs/reference.md. Run it with
// go generate ./dsl; its test checks the committed files are current.
package main

import (
	"log"
	"os"
	"path/filepath"

	"github.com/flowrun/flowrun/dsl"
)

func main() {
	for path, b := range generated("..") {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

// generated maps each generated file's path, under the repository root
// root, to its content.
func generated(root string) map[string][]byte {
	return map[string][]byte{
		filepath.Join(root, "schemas", "pipeline.schema.json"): dsl.Schema(),
		filepath.Join(root, "docs", "reference.md"):            []byte(dsl.Reference()),
	}
}
