package batch

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/flowrun/flowrun/store"
)

// PipelineChanges are what differs between the pipelines two batches ran
// (every file their loads read, as their items' runs recorded them) and
// the settings they ran them with: what a comparison shows first, so
// that a change in pass rate reads against the change that caused it.
type PipelineChanges struct {
	Files    []FileChange    `json:"files"`
	Settings []SettingChange `json:"settings"`
	// Unrecorded names the sides (A, B) whose files no item's run
	// recorded, as when no item started: their files are not compared.
	Unrecorded []string `json:"unrecorded,omitempty"`
}

// Same says nothing differs that the comparison could see.
func (c *PipelineChanges) Same() bool {
	return len(c.Files) == 0 && len(c.Settings) == 0 && len(c.Unrecorded) == 0
}

// FileChange is one file the two loads read differently.
type FileChange struct {
	Path string `json:"path"`          // as B's load read it, or A's when B did not
	Was  string `json:"was,omitempty"` // A's path, when the pipeline file was renamed
	// Status is changed, added (only B's load read it) or removed (only
	// A's did).
	Status string `json:"status"`
	// Lines are unified-diff lines: hunk headers (@@ -3,4 +3,5 @@), then
	// lines marked ' ', '-' or '+'; at most maxChangeLines of them.
	Lines []string `json:"lines"`
	More  int      `json:"more_lines"` // diff lines past Lines
}

// SettingChange is one batch setting that differs, as text.
type SettingChange struct {
	Name string `json:"name"`
	A    string `json:"a"`
	B    string `json:"b"`
}

// maxChangeLines bounds one file's diff lines: past them, a view says how
// many more there are.
const maxChangeLines = 40

// diffContext is the unchanged lines shown around each change.
const diffContext = 2

// ChangesBetween reads what changed from batch a to batch b.
func ChangesBetween(ctx context.Context, st *store.Store, a, b *store.Batch) (*PipelineChanges, error) {
	c := &PipelineChanges{Files: []FileChange{}, Settings: settingChanges(a, b)}
	fa, mainA, err := recordedFiles(ctx, st, a)
	if err != nil {
		return nil, err
	}
	fb, mainB, err := recordedFiles(ctx, st, b)
	if err != nil {
		return nil, err
	}
	if fa == nil {
		c.Unrecorded = append(c.Unrecorded, "A")
	}
	if fb == nil {
		c.Unrecorded = append(c.Unrecorded, "B")
	}
	if fa != nil && fb != nil {
		c.Files = fileChanges(fa, fb, mainA, mainB)
	}
	return c, nil
}

// recordedFiles are the files batch b's pipeline load read, by path, and
// the pipeline file's path among them, from the first of its items' runs
// the store still holds; nil when none does. Every item of a batch runs
// the pipeline as the batch loaded it (a resume refuses a changed one),
// so one run speaks for all.
func recordedFiles(ctx context.Context, st *store.Store, b *store.Batch) (map[string]string, string, error) {
	items, err := st.BatchItems(ctx, b.ID)
	if err != nil {
		return nil, "", fmt.Errorf("batch %s: reading its items: %w", b.ID, err)
	}
	for _, it := range items {
		if it.Run == "" {
			continue
		}
		run, err := st.Run(ctx, it.Run)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("batch %s: reading run %s: %w", b.ID, it.Run, err)
		}
		main := filepath.ToSlash(filepath.Base(run.Pipeline))
		if len(run.PipelineFiles) == 0 {
			// Recorded before runs kept every file the load read.
			return map[string]string{main: run.PipelineSrc}, main, nil
		}
		return run.PipelineFiles, main, nil
	}
	return nil, "", nil
}

// fileChanges diffs each file a and b hold, the pipeline files (mainA,
// mainB) with each other whatever their names, in path order.
func fileChanges(a, b map[string]string, mainA, mainB string) []FileChange {
	out := []FileChange{}
	if was, now := a[mainA], b[mainB]; was != now || mainA != mainB {
		fc := FileChange{Path: mainB, Status: "changed", Lines: []string{}}
		if mainA != mainB {
			fc.Was = mainA
		}
		fc.Lines, fc.More = unifiedDiff(was, now)
		out = append(out, fc)
	}
	paths := slices.Sorted(maps.Keys(b))
	for p := range a {
		if _, inB := b[p]; !inB {
			paths = append(paths, p)
		}
	}
	for _, p := range paths {
		if p == mainA || p == mainB {
			continue
		}
		was, inA := a[p]
		now, inB := b[p]
		status := "changed"
		switch {
		case !inA:
			status = "added"
		case !inB:
			status = "removed"
		case was == now:
			continue
		}
		fc := FileChange{Path: p, Status: status}
		fc.Lines, fc.More = unifiedDiff(was, now)
		out = append(out, fc)
	}
	return out
}

// diffLine is one line of a line diff and its line numbers on each side
// (counting from 1; the side it is not on keeps the next line's).
type diffLine struct {
	kind   byte // '=', '-' or '+'
	text   string
	aN, bN int
}

// unifiedDiff is the diff of two texts as unified-diff lines with
// diffContext lines of context, at most maxChangeLines of them, and how
// many lines did not fit.
func unifiedDiff(a, b string) ([]string, int) {
	var lines []diffLine
	aN, bN := 1, 1
	for _, op := range DiffText(newlineEnded(a), newlineEnded(b)) {
		for _, text := range strings.SplitAfter(op.Text, "\n") {
			if text == "" {
				continue
			}
			lines = append(lines, diffLine{op.Kind, strings.TrimSuffix(text, "\n"), aN, bN})
			if op.Kind != '+' {
				aN++
			}
			if op.Kind != '-' {
				bN++
			}
		}
	}
	keep := make([]bool, len(lines))
	for i, l := range lines {
		if l.kind == '=' {
			continue
		}
		for j := max(0, i-diffContext); j <= min(len(lines)-1, i+diffContext); j++ {
			keep[j] = true
		}
	}
	var out []string
	for i := 0; i < len(lines); {
		if !keep[i] {
			i++
			continue
		}
		end := i
		for end < len(lines) && keep[end] {
			end++
		}
		out = append(out, hunkHeader(lines[i:end]))
		for _, l := range lines[i:end] {
			mark := map[byte]string{'=': " ", '-': "-", '+': "+"}[l.kind]
			out = append(out, mark+l.text)
		}
		i = end
	}
	if len(out) > maxChangeLines {
		return out[:maxChangeLines], len(out) - maxChangeLines
	}
	return out, 0
}

// hunkHeader is the @@ line of a run of diff lines.
func hunkHeader(h []diffLine) string {
	var na, nb int
	for _, l := range h {
		if l.kind != '+' {
			na++
		}
		if l.kind != '-' {
			nb++
		}
	}
	startA, startB := h[0].aN, h[0].bN
	// As diff -u writes it, an empty side starts at the line before.
	if na == 0 {
		startA--
	}
	if nb == 0 {
		startB--
	}
	return fmt.Sprintf("@@ -%d,%d +%d,%d @@", startA, na, startB, nb)
}

// newlineEnded is s ending in a newline, unless empty: DiffText diffs a
// text of one line by words, and a file by lines.
func newlineEnded(s string) string {
	if s == "" || strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}

// settingChanges are the settings batch b ran with that differ from a's:
// the dataset, the model overrides (--model, a sweep's variant) and the
// options that choose or score the items.
func settingChanges(a, b *store.Batch) []SettingChange {
	sa, _ := SettingsOf(a)
	sb, _ := SettingsOf(b)
	list := func(v []string) string {
		if len(v) == 0 {
			return "none"
		}
		return strings.Join(v, ", ")
	}
	number := func(n int) string {
		if n == 0 {
			return "none"
		}
		return fmt.Sprint(n)
	}
	text := func(s string) string {
		if s == "" {
			return "none"
		}
		return s
	}
	mapping := func(m map[string]string) string {
		var out []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, k+"="+m[k])
		}
		return list(out)
	}
	replay := func(path string) string {
		if path == "" {
			return "none (live models)"
		}
		return filepath.Base(path)
	}
	// A seed matters only to a sample.
	seed := func(s Settings) string {
		if s.Sample == 0 {
			return "none"
		}
		return fmt.Sprint(s.Seed)
	}
	dataset := func(x *store.Batch) string {
		return x.Dataset + " (" + shortHash(x.DatasetHash) + ")"
	}
	all := []SettingChange{
		{"dataset", dataset(a), dataset(b)},
		{"model overrides", list(sa.Model), list(sb.Model)},
		{"replay", replay(sa.Replay), replay(sb.Replay)},
		{"repeat", number(max(sa.Repeat, 1)), number(max(sb.Repeat, 1))},
		{"max loops", number(sa.MaxLoops), number(sb.MaxLoops)},
		{"auto", fmt.Sprint(sa.Auto), fmt.Sprint(sb.Auto)},
		{"filter", text(sa.Filter), text(sb.Filter)},
		{"sample", number(sa.Sample), number(sb.Sample)},
		{"seed", seed(sa), seed(sb)},
		{"limit", number(sa.Limit), number(sb.Limit)},
		{"map", mapping(sa.Map), mapping(sb.Map)},
		{"score", list(sa.Score), list(sb.Score)},
		{"metrics", list(sa.Metrics), list(sb.Metrics)},
		{"primary metric", text(sa.Primary), text(sb.Primary)},
	}
	out := []SettingChange{}
	for _, s := range all {
		if s.A != s.B {
			out = append(out, s)
		}
	}
	return out
}

// shortHash is a hash's first 8 characters, enough to tell files apart.
func shortHash(h string) string {
	if len(h) > 8 {
		return h[:8]
	}
	return h
}

// ChangesHTML shows what changed between two batches' pipelines as an
// HTML fragment, for the report and the web UI alike: each file's diff
// (removed lines struck, added lines marked), folded past its first
// lines, then the settings that differ; one line when nothing did.
func ChangesHTML(c *PipelineChanges) template.HTML {
	type line struct {
		Kind string // "-", "+", "@" (a hunk header) or " "
		Text string
	}
	type file struct {
		FileChange
		Diff []line
	}
	d := struct {
		*PipelineChanges
		Same  bool
		Diffs []file
	}{PipelineChanges: c, Same: c.Same()}
	for _, f := range c.Files {
		fd := file{FileChange: f}
		for _, l := range f.Lines {
			kind := l[:1]
			if strings.HasPrefix(l, "@@") {
				kind = "@"
			}
			fd.Diff = append(fd.Diff, line{kind, l})
		}
		d.Diffs = append(d.Diffs, fd)
	}
	return execute("changes", d)
}
