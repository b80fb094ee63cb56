package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/internal/proc"
)

// goHarness is main.go for a Go build: it decodes the arguments into the
// called function's parameter types and reports the result after the
// marker line, the same envelope as the Python harness.
const goHarness = `package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"runtime/debug"
	"strconv"
)

var flowrunCall any = %s

func main() {
	var req struct {
		Args  json.RawMessage ` + "`json:\"args\"`" + `
		Nonce string          ` + "`json:\"nonce\"`" + `
	}
	in, _ := io.ReadAll(os.Stdin)
	_ = json.Unmarshal(in, &req)
	marker := "\n\x1eflowrun-result-" + req.Nonce + "\n"
	report := func(result any, class, msg string, line int) {
		env := map[string]any{"result": result, "error": nil}
		if class != "" {
			env["result"] = nil
			env["error"] = map[string]any{"class": class, "message": msg, "line": line}
		}
		b, err := json.Marshal(env)
		if err != nil {
			b, _ = json.Marshal(map[string]any{"error": map[string]any{"class": "bad_result", "message": "the result is not JSON-serialisable: " + err.Error()}})
		}
		os.Stdout.WriteString(marker + string(b) + "\n")
	}
	defer func() {
		if r := recover(); r != nil {
			line := 0
			if m := regexp.MustCompile(` + "`code\\.go:(\\d+)`" + `).FindSubmatch(debug.Stack()); m != nil {
				line, _ = strconv.Atoi(string(m[1]))
			}
			report(nil, "runtime_error", fmt.Sprintf("panic: %%v", r), line)
		}
	}()
	fn := reflect.ValueOf(flowrunCall)
	if fn.Kind() != reflect.Func {
		return
	}
	t := fn.Type()
	var raw []json.RawMessage
	if len(req.Args) > 0 && req.Args[0] == '[' {
		_ = json.Unmarshal(req.Args, &raw)
	} else if len(req.Args) > 0 && string(req.Args) != "null" {
		raw = []json.RawMessage{req.Args}
	}
	if len(raw) != t.NumIn() {
		report(nil, "runtime_error", fmt.Sprintf("the function takes %%d arguments; args has %%d", t.NumIn(), len(raw)), 0)
		return
	}
	in2 := make([]reflect.Value, len(raw))
	for i := range raw {
		p := reflect.New(t.In(i))
		if err := json.Unmarshal(raw[i], p.Interface()); err != nil {
			report(nil, "runtime_error", fmt.Sprintf("argument %%d does not fit %%s: %%v", i+1, t.In(i), err), 0)
			return
		}
		in2[i] = p.Elem()
	}
	out := fn.Call(in2)
	if n := len(out); n > 0 && t.Out(n-1) == reflect.TypeOf((*error)(nil)).Elem() {
		if err, _ := out[n-1].Interface().(error); err != nil {
			report(nil, "runtime_error", "error: "+err.Error(), 0)
			return
		}
		out = out[:n-1]
	}
	var result any
	switch len(out) {
	case 0:
	case 1:
		result = out[0].Interface()
	default:
		list := make([]any, len(out))
		for i, v := range out {
			list[i] = v.Interface()
		}
		result = list
	}
	b, err := json.Marshal(result)
	if err != nil {
		report(nil, "bad_result", "the result is not JSON-serialisable: "+err.Error(), 0)
		return
	}
	os.Stdout.WriteString(marker + "{\"result\": " + string(b) + ", \"error\": null}\n")
}
`

// goBuildMemory caps the resident memory of one go build (the go command,
// the compiler and the linker together).
const goBuildMemory = 2 << 30

// DefaultGoBuilds is how many go builds run at once: with goBuildMemory
// each, compiling never holds more than 4 GiB however many runs want Go
// code built; the others wait their turn, within their timeout.
const DefaultGoBuilds = 2

// goBuilds compiles Go sources to wasip1 modules, cached by source hash.
type goBuilds struct {
	dir    string
	memory int64         // the cap on a build's resident memory
	slots  chan struct{} // one per build running
	cache  *diskCache
	locks  sync.Map // hash -> chan struct{}, held while building that source
	stale  sync.Once
}

func newGoBuilds(dir string, builds int, cacheBytes int64) *goBuilds {
	return &goBuilds{dir: dir, memory: goBuildMemory, slots: make(chan struct{}, builds),
		cache: &diskCache{dir: dir, maxBytes: cacheBytes}}
}

var goErrRE = regexp.MustCompile(`(?m)^\./code\.go:(\d+):(\d+): (.*)$`)

// build returns the module for source (calling call), or a result saying
// why there is none: a compile error, or a compile that took longer than
// timeout or more than its memory cap. The go command and everything it
// starts run in one process group, killed at the deadline or when ctx
// ends; err is set when ctx ended.
func (g *goBuilds) build(ctx context.Context, source, call string, timeout time.Duration) (string, *Result, error) {
	src, hasMain, res := prepareGoSource(source)
	if res != nil {
		return "", res, nil
	}
	target := "nil"
	switch {
	case call != "":
		target = call
	case hasMain:
		// A snippet with no function to call runs its main.
		target = renamedMain
	}
	harness := fmt.Sprintf(goHarness, target)
	sum := sha256.Sum256([]byte(runtime.Version() + "\x00" + harness + "\x00" + src))
	hash := hex.EncodeToString(sum[:12])
	builds := filepath.Join(g.dir, "go")
	out := filepath.Join(builds, hash+".wasm")
	bctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	lock, _ := g.locks.LoadOrStore(hash, make(chan struct{}, 1))
	select {
	case lock.(chan struct{}) <- struct{}{}:
		defer func() { <-lock.(chan struct{}) }()
	case <-bctx.Done():
		return g.stopped(ctx, timeout, waitedForSame)
	}
	if _, err := os.Stat(out); err == nil {
		used(out)
		return out, nil, nil
	}
	select {
	case g.slots <- struct{}{}:
		defer func() { <-g.slots }()
	case <-bctx.Done():
		return g.stopped(ctx, timeout, waitedForSlot)
	}
	if err := os.MkdirAll(builds, 0o755); err != nil {
		return "", nil, &UnavailableError{Reason: fmt.Sprintf("go build: %v", err)}
	}
	g.stale.Do(func() { removeStaleBuilds(builds) })
	// Everything a build writes, the go command's own work directory
	// (GOTMPDIR) included, is under work, removed when the build ends,
	// however it ends.
	work, err := os.MkdirTemp(builds, "build-")
	if err != nil {
		return "", nil, &UnavailableError{Reason: fmt.Sprintf("go build: %v", err)}
	}
	defer os.RemoveAll(work)
	files := map[string]string{"src/go.mod": "module sandboxed\n\ngo 1.22\n", "src/code.go": src, "src/flowrun_main.go": harness}
	for name, body := range files {
		p := filepath.Join(work, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", nil, &UnavailableError{Reason: fmt.Sprintf("go build: %v", err)}
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return "", nil, &UnavailableError{Reason: fmt.Sprintf("go build: %v", err)}
		}
	}
	tmp := filepath.Join(work, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return "", nil, &UnavailableError{Reason: fmt.Sprintf("go build: %v", err)}
	}
	built := filepath.Join(work, "code.wasm")
	cmd := exec.CommandContext(bctx, "go", "build", "-trimpath", "-o", built, ".")
	cmd.Dir = filepath.Join(work, "src")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0", "GOFLAGS=", "GOWORK=off", "GOTMPDIR="+tmp)
	stderr := &headWriter{limit: 64 << 10}
	cmd.Stderr = stderr
	grp, err := proc.Start(cmd, proc.Limits{MemoryBytes: g.memory})
	if err != nil {
		return "", nil, &UnavailableError{Reason: fmt.Sprintf("starting go build: %v", err)}
	}
	if err := grp.Wait(); err != nil {
		switch {
		case bctx.Err() != nil:
			return g.stopped(ctx, timeout, compiling)
		case grp.OverMemory():
			return "", failed(errclass.MemoryLimit, "compiling the code took more than %d MiB and was stopped", g.memory>>20), nil
		}
		return "", goCompileError(stderr.buf.String(), call, err), nil
	}
	if err := os.Rename(built, out); err != nil {
		return "", nil, &UnavailableError{Reason: fmt.Sprintf("go build: %v", err)}
	}
	g.cache.evict(out)
	return out, nil, nil
}

// buildStage is where a build was when its time ran out.
type buildStage int

const (
	waitedForSame buildStage = iota // another run was building the same source
	waitedForSlot                   // every build slot was taken (DefaultGoBuilds)
	compiling
)

// stopped is how a build that did not finish ends: ctx's error when the
// caller stopped waiting, a timeout result when the build's own deadline
// passed.
func (g *goBuilds) stopped(ctx context.Context, timeout time.Duration, stage buildStage) (string, *Result, error) {
	if err := ctx.Err(); err != nil {
		return "", nil, err
	}
	switch stage {
	case compiling:
		return "", failed(errclass.Timeout, "compiling the code took longer than its timeout (%s) and was stopped", timeout), nil
	case waitedForSlot:
		return "", failed(errclass.Timeout, "the code was still waiting for one of the %d go builds that run at once when its timeout (%s) passed", cap(g.slots), timeout), nil
	}
	return "", failed(errclass.Timeout, "the same code was still being compiled for another run when its timeout (%s) passed", timeout), nil
}

// removeStaleBuilds removes build directories a killed flowrun left behind.
func removeStaleBuilds(dir string) {
	old, _ := filepath.Glob(filepath.Join(dir, "build-*"))
	for _, d := range old {
		if info, err := os.Stat(d); err == nil && time.Since(info.ModTime()) > 24*time.Hour {
			_ = os.RemoveAll(d)
		}
	}
}

func goCompileError(out, call string, err error) *Result {
	if strings.Contains(out, "flowrun_main.go") && strings.Contains(out, "undefined: "+call) {
		return failed(errclass.CompileError, "the code defines no function named %s", call)
	}
	var msgs []string
	line := 0
	for _, m := range goErrRE.FindAllStringSubmatch(out, -1) {
		if line == 0 {
			line, _ = strconv.Atoi(m[1])
		}
		msgs = append(msgs, fmt.Sprintf("line %s:%s: %s", m[1], m[2], m[3]))
	}
	if len(msgs) == 0 {
		return failed(errclass.CompileError, "go build: %v: %s", err, strings.TrimSpace(out))
	}
	return &Result{Error: &Error{Class: errclass.CompileError, Message: strings.Join(msgs, "\n"), Line: line}}
}

// renamedMain is what the code's own main function is called in a build.
const renamedMain = "mainOfTheCode"

// prepareGoSource makes model-written Go build next to the harness without
// moving a line: the package clause becomes main, and a main function is
// renamed, by editing the same bytes in place.
func prepareGoSource(src string) (out string, hasMain bool, res *Result) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "code.go", src, parser.SkipObjectResolution)
	if err != nil {
		line := 0
		if m := regexp.MustCompile(`code\.go:(\d+)`).FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
		}
		return "", false, &Result{Error: &Error{Class: errclass.CompileError, Message: strings.ReplaceAll(err.Error(), "code.go:", "line "), Line: line}}
	}
	type edit struct {
		off, end int
		text     string
	}
	var edits []edit
	if f.Name.Name != "main" {
		edits = append(edits, edit{fset.Position(f.Name.Pos()).Offset, fset.Position(f.Name.End()).Offset, "main"})
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == "main" {
			edits = append(edits, edit{fset.Position(fd.Name.Pos()).Offset, fset.Position(fd.Name.End()).Offset, renamedMain})
			hasMain = true
		}
	}
	for i := len(edits) - 1; i >= 0; i-- {
		e := edits[i]
		src = src[:e.off] + e.text + src[e.end:]
	}
	return src, hasMain, nil
}

// GoToolchain finds the go command the go language builds with and its
// version; path is "" when there is none on PATH.
func GoToolchain(ctx context.Context) (path, version string) {
	p, err := exec.LookPath("go")
	if err != nil {
		return "", ""
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, p, "env", "GOVERSION").Output()
	if err != nil {
		return p, "unknown version"
	}
	return p, strings.TrimSpace(string(out))
}
