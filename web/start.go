package web

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/graph"
	"github.com/flowrun/flowrun/internal/confined"
	"github.com/flowrun/flowrun/plan"
	"github.com/flowrun/flowrun/sandbox"
)

// maxUpload caps a file given for an input, as --input name=@file is.
const maxUpload = 64 << 20

// listedPipeline is a pipeline the start page lists, with what its file
// says it does.
type listedPipeline struct {
	Rel         string // relative to the server's directory, slash-separated
	Name        string
	Description string
	Problem     string // why it does not load, when it does not
}

// pipelines lists the pipelines under the server's directory
// (engine.Discover), each loaded for its name and description.
func (s *Server) pipelines(ctx context.Context) []listedPipeline {
	rels, _ := engine.Discover(s.dir)
	out := make([]listedPipeline, 0, len(rels))
	for _, rel := range rels {
		l := listedPipeline{Rel: rel}
		path, err := s.resolve(ctx, rel)
		if err != nil {
			l.Problem = s.say(err)
			out = append(out, l)
			continue
		}
		if p, _ := dsl.Load(path); p != nil {
			l.Name, l.Description = p.Name, p.Description
		} else {
			l.Problem = "it does not load: choose it to see why"
		}
		out = append(out, l)
	}
	return out
}

// say is err as a page shows it. It names no path on the server: a
// pipeline by its name relative to the served directory, the directory
// itself as such. A sandbox missing Python says how to install it, as
// the CLI does.
func (s *Server) say(err error) string {
	msg := err.Error()
	var unavailable *sandbox.UnavailableError
	if errors.As(err, &unavailable) && unavailable.Missing == sandbox.Python {
		// Its reason names where on the server Python was looked for.
		msg = strings.ReplaceAll(msg, unavailable.Reason, "Python for WASI is not installed on the server") +
			": run flowrun sandbox install python there"
	}
	msg = strings.ReplaceAll(msg, s.dir+string(filepath.Separator), "")
	return strings.ReplaceAll(msg, s.dir, "the served directory")
}

// shown is a recorded pipeline path as a page shows it: relative to the
// served directory when it is in it, else its file name, so that no page
// names a path on the server.
func (s *Server) shown(path string) string {
	if !filepath.IsAbs(path) {
		return path
	}
	if rel, err := filepath.Rel(s.dir, path); err == nil && filepath.IsLocal(rel) {
		return filepath.ToSlash(rel)
	}
	return filepath.Base(path)
}

// resolve turns a pipeline named relative to the server's directory into
// its path, refusing any name that leads outside it (.., an absolute
// path, a symbolic link).
func (s *Server) resolve(ctx context.Context, rel string) (string, error) {
	d := confined.Dir{Root: s.dir, MaxBytes: maxUpload, Limit: "the pipeline file size"}
	if _, err := d.ReadFile(ctx, rel); err != nil {
		if errors.Is(err, confined.ErrOutside) {
			return "", fmt.Errorf("pipeline %q: it is outside the served directory, and only pipelines in it can be started", rel)
		}
		return "", fmt.Errorf("pipeline %q: %w", rel, err)
	}
	return filepath.Join(s.dir, filepath.FromSlash(rel)), nil
}

// inside reports whether a recorded pipeline path is under the server's
// directory, so that its run may be resumed or forked here.
func (s *Server) inside(ctx context.Context, abs string) error {
	rel, err := filepath.Rel(s.dir, abs)
	if err != nil || !filepath.IsLocal(rel) {
		return fmt.Errorf("the run's pipeline %s is outside the served directory: resume it with the CLI", filepath.Base(abs))
	}
	_, err = s.resolve(ctx, filepath.ToSlash(rel))
	return err
}

// field is one control of a generated form.
type field struct {
	Name        string // the form key
	Label       string
	Type        string // string, number, integer, boolean, array, object
	Description string
	Enum        []string
	Value       string // the default, as the control shows it
	Long        bool   // a textarea
	File        bool   // also takes a file
	Required    bool
}

func inputFields(p *dsl.Pipeline) []field {
	var out []field
	for _, in := range p.Inputs {
		f := field{Name: "in." + in.Name, Label: in.Name, Type: in.Type, Description: in.Description, Required: !in.HasDefault}
		f.Enum, f.Value = enumAndDefault(in.Schema, in.Default, in.HasDefault)
		f.Long = in.Type == "object" || in.Type == "array" || (in.Type == "string" && len(f.Value) > 60)
		f.File = in.Type == "string" || in.Type == "object" || in.Type == "array"
		out = append(out, f)
	}
	return out
}

func enumAndDefault(schema map[string]any, def any, has bool) ([]string, string) {
	var enum []string
	if vs, ok := schema["enum"].([]any); ok {
		for _, v := range vs {
			enum = append(enum, dsl.Stringify(v))
		}
	}
	if !has {
		return enum, ""
	}
	return enum, dsl.Stringify(def)
}

type startData struct {
	page
	Pipelines   []listedPipeline
	Pipeline    string
	Loaded      *dsl.Pipeline
	Graph       *graph.Drawing
	Plan        *plan.Plan // with the inputs' defaults
	Diagnostics string
	Fields      []field
	Models      []modelField
}

type modelField struct{ Name, Model string }

func (s *Server) startPage(w http.ResponseWriter, r *http.Request) {
	d := startData{page: s.page(r, "Start a run", "start"), Pipelines: s.pipelines(r.Context()), Pipeline: r.URL.Query().Get("pipeline")}
	if d.Pipeline != "" {
		s.loadForm(r.Context(), &d)
	}
	s.render(w, http.StatusOK, "start", d)
}

// loadForm validates the chosen pipeline and builds its form.
func (s *Server) loadForm(ctx context.Context, d *startData) {
	path, err := s.resolve(ctx, d.Pipeline)
	if err != nil {
		d.Error = s.say(err)
		return
	}
	p, ds := dsl.Load(path)
	if len(ds) > 0 {
		d.Diagnostics = s.say(errors.New(ds.String()))
	}
	if p == nil {
		return
	}
	d.Loaded, d.Fields, d.Graph, d.Plan = p, inputFields(p), graph.Layout(p), plan.Make(p, plan.Options{})
	for _, name := range slices.Sorted(maps.Keys(p.Models)) {
		d.Models = append(d.Models, modelField{Name: name, Model: p.Models[name].Model})
	}
}

func (s *Server) startRun(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseMultipartForm(maxUpload); err != nil && !errors.Is(err, http.ErrNotMultipart) {
		s.fail(w, r, http.StatusBadRequest, fmt.Errorf("reading the form: %w", err))
		return
	}
	rel := r.FormValue("pipeline")
	again := func(err error) { s.back(w, r, "/start?pipeline="+urlQuery(rel), err) }
	path, err := s.resolve(r.Context(), rel)
	if err != nil {
		again(err)
		return
	}
	p, ds := dsl.Load(path)
	if p == nil {
		again(fmt.Errorf("%s does not load:\n%s", rel, ds))
		return
	}
	inputs, err := formInputs(r, p)
	if err != nil {
		again(err)
		return
	}
	var models []string
	for name := range p.Models {
		if m := strings.TrimSpace(r.FormValue("model." + name)); m != "" && m != p.Models[name].Model {
			models = append(models, name+"="+m)
		}
	}
	maxLoops := 0
	if v := r.FormValue("max_loops"); v != "" {
		if maxLoops, err = strconv.Atoi(v); err != nil || maxLoops < 0 {
			again(fmt.Errorf("max loops %q: give a whole number, 0 for no cap", v))
			return
		}
	}
	auto := r.FormValue("auto") != ""
	id, err := s.launch(newHuman(auto), "", rel, func(ctx context.Context, o engine.RunOptions) (*engine.Run, error) {
		o.Models, o.MaxLoops, o.Auto = models, maxLoops, auto
		return s.engine.Start(ctx, p, inputs, o)
	})
	if err != nil {
		again(err)
		return
	}
	if id == "" {
		// Queued: the runs page lists it until it starts.
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/runs/"+id, http.StatusSeeOther)
}

// formInputs reads the inputs from the form by the rule every front end
// reads inputs given as text or as a file by (engine.InputText and
// engine.InputFile).
func formInputs(r *http.Request, p *dsl.Pipeline) (map[string]any, error) {
	in := map[string]any{}
	for _, d := range p.Inputs {
		key := "in." + d.Name
		if r.MultipartForm != nil && len(r.MultipartForm.File["file."+d.Name]) > 0 {
			fh := r.MultipartForm.File["file."+d.Name][0]
			f, err := fh.Open()
			if err != nil {
				return nil, fmt.Errorf("input %s: %w", d.Name, err)
			}
			b, err := io.ReadAll(io.LimitReader(f, maxUpload))
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("input %s: %w", d.Name, err)
			}
			if len(b) > 0 {
				v, err := engine.InputFile(d.Type, b)
				if d.Format == "path" {
					// A browser names no file on the server: the upload
					// itself is the value, as a data URL.
					v, err = dataURL(b), nil
				}
				if err != nil {
					return nil, fmt.Errorf("input %s: the file %s: %w", d.Name, fh.Filename, err)
				}
				in[d.Name] = v
				continue
			}
		}
		vals, given := r.Form[key]
		if !given || (vals[0] == "" && d.HasDefault && d.Type != "string") {
			continue
		}
		in[d.Name] = engine.InputText(d.Type, vals[0])
	}
	return in, nil
}

func dataURL(b []byte) string {
	typ, _, _ := strings.Cut(http.DetectContentType(b), ";")
	return "data:" + typ + ";base64," + base64.StdEncoding.EncodeToString(b)
}
