package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/flowrun/flowrun/sandbox"
)

const sandboxUsage = `Usage:
  flowrun sandbox install python [--from DIR|TARBALL] [--force]
                                    install CPython for WASI (the code node's python)
  flowrun sandbox status [--json] [--verify]
                                    say what the sandbox has installed

Without --from, install builds CPython ` + sandbox.PythonVersion + ` from source with
sandbox/python/build.sh (several minutes; needs a Debian-like machine with apt,
as root or with sudo). With --from, it takes that script's output directory,
or a .tar.gz of it, built elsewhere. It installs into
$XDG_CACHE_HOME/flowrun/python/` + sandbox.PythonVersion + ` (~/.cache when unset).
`

func sandboxCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "flowrun sandbox: name a subcommand: flowrun sandbox install python, flowrun sandbox status (see flowrun sandbox --help)")
		return exitInvalid
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, sandboxUsage)
		return exitOK
	case "install":
		return sandboxInstallCmd(ctx, args[1:], stdout, stderr)
	case "status":
		return sandboxStatusCmd(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "flowrun sandbox: unknown subcommand %q (install python, status; see flowrun sandbox --help)\n", args[0])
	return exitInvalid
}

func sandboxInstallCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sandbox install", "flowrun sandbox install python [--from DIR|TARBALL] [--force]\n\n"+
		"Installs CPython "+sandbox.PythonVersion+" for WASI into "+sandbox.PythonDir()+".\n"+
		"Without --from, builds it from source (several minutes; a Debian-like machine\n"+
		"with apt, as root or with sudo). The new tree is checked (print(1) under\n"+
		"wazero) before it replaces anything.")
	from := fs.String("from", "", "take python.wasm and lib/python3.13 from this `DIR` (build.sh's output) or a .tar.gz of it")
	force := fs.Bool("force", false, "reinstall even when a working installation is there")
	rest, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(rest) != 1 || rest[0] != "python" {
		fmt.Fprintln(stderr, "flowrun sandbox install: name what to install: flowrun sandbox install python [--from DIR|TARBALL]")
		return exitInvalid
	}
	start := time.Now()
	info, err := sandbox.InstallPython(ctx, sandbox.InstallOptions{From: *from, Force: *force, Stdout: stdout})
	if err != nil {
		fmt.Fprintf(stderr, "flowrun sandbox install python: %v\n", err)
		return exitFailed
	}
	if d := time.Since(start); d > 2*time.Second {
		fmt.Fprintf(stdout, "python.wasm %s, stdlib %s in %d files (%s)\n",
			humanBytes(info.WasmBytes), humanBytes(info.StdlibBytes), info.StdlibFiles, d.Round(time.Second))
	}
	return exitOK
}

func sandboxStatusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sandbox status", "flowrun sandbox status [--json] [--verify]\n\nSays whether CPython for WASI is installed, and which Go toolchain builds\nthe go language's code.")
	asJSON := fs.Bool("json", false, "print the status as JSON")
	verify := fs.Bool("verify", false, "also run print(1) with the installed python.wasm (exit 1 if it fails)")
	rest, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "flowrun sandbox status: unexpected %q\n", rest[0])
		return exitInvalid
	}
	py := sandbox.PythonStatus()
	verified, verifyErr := "", error(nil)
	if *verify && py.Installed {
		verifyErr = sandbox.VerifyPython(ctx, py.Dir)
		verified = "ok"
		if verifyErr != nil {
			verified = verifyErr.Error()
		}
	}
	goPath, goVersion := goToolchain(ctx)
	exit := exitOK
	if verifyErr != nil || (*verify && !py.Installed) {
		exit = exitFailed
	}

	if *asJSON {
		p := map[string]any{
			"version":   sandbox.PythonVersion,
			"dir":       py.Dir,
			"installed": py.Installed,
		}
		if py.Problem != "" {
			p["problem"] = py.Problem
		}
		if py.Installed {
			p["wasm_bytes"] = py.WasmBytes
			p["stdlib_bytes"] = py.StdlibBytes
			p["stdlib_files"] = py.StdlibFiles
			p["manifest"] = py.Manifest
		}
		if verified != "" {
			p["verify"] = verified
		}
		g := map[string]any{"available": goPath != ""}
		if goPath != "" {
			g["path"], g["version"] = goPath, goVersion
		}
		if c := writeJSON(stdout, map[string]any{"python": p, "go": g}); c != exitOK {
			return c
		}
		return exit
	}

	if py.Installed {
		fmt.Fprintf(stdout, "python %s: installed in %s\n", sandbox.PythonVersion, py.Dir)
		fmt.Fprintf(stdout, "  python.wasm  %s\n", humanBytes(py.WasmBytes))
		fmt.Fprintf(stdout, "  stdlib       %s in %d files\n", humanBytes(py.StdlibBytes), py.StdlibFiles)
		if s := py.Manifest["source_sha256"]; s != "" {
			fmt.Fprintf(stdout, "  source       sha256 %s\n", s)
		}
		for _, k := range []string{"build_date", "installed_from"} {
			if v := py.Manifest[k]; v != "" {
				fmt.Fprintf(stdout, "  %-12s %s\n", strings.ReplaceAll(k, "_", " "), v)
			}
		}
		if verified != "" {
			fmt.Fprintf(stdout, "  print(1)     %s\n", verified)
		}
	} else {
		fmt.Fprintf(stdout, "python %s: not installed (%s): run flowrun sandbox install python\n", sandbox.PythonVersion, py.Problem)
	}
	if goPath != "" {
		fmt.Fprintf(stdout, "go: %s (%s), builds to wasip1\n", goVersion, goPath)
	} else {
		fmt.Fprintln(stdout, "go: no go toolchain on PATH: the go language needs one")
	}
	return exit
}

// goToolchain finds the go command the go language builds with.
func goToolchain(ctx context.Context) (path, version string) {
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

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
