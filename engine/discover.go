package engine

import (
	"context"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/flowrun/flowrun/internal/confined"
)

// Discover lists the pipelines under dir, as slash paths relative to it,
// sorted: *.yaml and *.yml not named as cassettes or tests, outside
// hidden, testdata and node_modules directories, whose top level reads as
// a pipeline's (LooksLikePipeline) or not as YAML at all, so that a cassette, a dataset or a
// prompt file is not listed whatever its name. Files are read through a confined lookup (package
// confined): one that cannot be read there (a symbolic link leading
// outside dir, a file over MaxInputFileBytes) is listed, for the caller's
// own read of it to say why it is not served. Only an unreadable dir is
// an error; an unreadable directory under it is left out.
func Discover(dir string) ([]string, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	confine := confined.Dir{Root: root, MaxBytes: MaxInputFileBytes, Limit: "the pipeline file size"}
	var out []string
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
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
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if src, err := confine.ReadFile(context.Background(), rel); err == nil && !mayBePipeline(src) {
			return nil
		}
		out = append(out, rel)
		return nil
	})
	slices.Sort(out)
	return out, err
}

// LooksLikePipeline tells a pipeline file from the other YAML files a
// directory of pipelines holds (data, cassettes, prompts): it has
// version: and nodes: or outputs: at the top.
func LooksLikePipeline(src []byte) bool {
	var top any
	return yaml.Unmarshal(src, &top) == nil && hasPipelineKeys(top)
}

// mayBePipeline is LooksLikePipeline, but true for a file that is not
// YAML at all: a pipeline with a syntax error is listed, for its load to
// point at the error, rather than left out without a word.
func mayBePipeline(src []byte) bool {
	var top any
	return yaml.Unmarshal(src, &top) != nil || hasPipelineKeys(top)
}

func hasPipelineKeys(doc any) bool {
	top, _ := doc.(map[string]any)
	_, version := top["version"]
	_, nodes := top["nodes"]
	_, outputs := top["outputs"]
	return version && (nodes || outputs)
}
