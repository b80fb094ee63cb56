package engine

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Discover lists the files under dir that may be pipelines, as slash paths
// relative to it, sorted: *.yaml and *.yml that are not cassettes or
// tests, outside hidden, testdata and node_modules directories. A
// symbolic link is listed: reading it through a confined lookup (package
// confined) tells whether it stays inside dir. Only an unreadable dir is
// an error; an unreadable directory under it is left out.
func Discover(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == dir {
				return err
			}
			return nil
		}
		name := d.Name()
		if d.IsDir() {
			if path != dir && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) ||
			strings.HasSuffix(name, ".cassette.yaml") || strings.HasSuffix(name, ".test.yaml") {
			return nil
		}
		if rel, err := filepath.Rel(dir, path); err == nil {
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// LooksLikePipeline tells a pipeline file from the other YAML files a
// directory of pipelines holds (data, cassettes, prompts): it has
// version: and nodes: or outputs: at the top.
func LooksLikePipeline(src []byte) bool {
	var top map[string]any
	if yaml.Unmarshal(src, &top) != nil {
		return false
	}
	_, version := top["version"]
	_, nodes := top["nodes"]
	_, outputs := top["outputs"]
	return version && (nodes || outputs)
}
