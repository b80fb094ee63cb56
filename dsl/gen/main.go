// Command gen writes the files generated from the dsl package's specs:
// schemas/pipeline.schema.json and docs/reference.md. Run it with
// go generate ./dsl; a test in dsl checks the committed files are current.
package main

import (
	"log"
	"os"
	"path/filepath"

	"github.com/flowrun/flowrun/dsl"
)

func main() {
	root := ".."
	files := map[string][]byte{
		filepath.Join(root, "schemas", "pipeline.schema.json"): dsl.Schema(),
		filepath.Join(root, "docs", "reference.md"):            []byte(dsl.Reference()),
	}
	for path, b := range files {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}
