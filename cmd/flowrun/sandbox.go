package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/sandbox"
)

const sandboxUsage = `Usage:
  flowrun sandbox install python [--from DIR|ARCHIVE [--sha256 HEX]] [--force]
                                    install CPython for WASI (the code node's python)
  flowrun sandbox export [-o FILE]  write the installed CPython for WASI as one archive
  flowrun sandbox status [--json] [--verify]
                                    say what the sandbox has installed

Without --from, install builds CPython ` + sandbox.PythonVersion + ` from source with
sandbox/python/build.sh (several minutes; Linux only, a Debian-like machine with
apt, as root or with sudo). With --from, it takes that script's output directory,
or an archive that flowrun sandbox export wrote on another machine (or a .tar.gz
of that directory), on any OS. An archive is checked by its sha256: --sha256 HEX,
or FILE.sha256 beside it as export writes it. It installs into
$XDG_CACHE_HOME/flowrun/python/` + sandbox.PythonVersion + ` (~/.cache when unset).
`

func sandboxCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "flowrun sandbox: name a subcommand: flowrun sandbox install python, flowrun sandbox export, flowrun sandbox status (see flowrun sandbox --help)")
		return exitInvalid
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, sandboxUsage)
		return exitOK
	case "install":
		return sandboxInstallCmd(ctx, args[1:], stdout, stderr)
	case "export":
		return sandboxExportCmd(args[1:], stdout, stderr)
	case "status":
		return sandboxStatusCmd(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "flowrun sandbox: unknown subcommand %q (install python, export, status; see flowrun sandbox --help)\n", args[0])
	return exitInvalid
}

func sandboxInstallCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sandbox install", "flowrun sandbox install python [--from DIR|ARCHIVE [--sha256 HEX]] [--force]\n\n"+
		"Installs CPython "+sandbox.PythonVersion+" for WASI into "+sandbox.PythonDir()+".\n"+
		"Without --from, builds it from source (several minutes; Linux only, a\n"+
		"Debian-like machine with apt, as root or with sudo). With --from ARCHIVE,\n"+
		"installs what flowrun sandbox export wrote, on any OS, once its sha256\n"+
		"matches (--sha256, or ARCHIVE.sha256 beside it). The new tree is checked\n"+
		"(print(1) under wazero) before it replaces anything.")
	from := fs.String("from", "", "take python.wasm and lib/python3.13 from this `DIR` (build.sh's output) or an archive of it (flowrun sandbox export's)")
	sum := fs.String("sha256", "", "the --from archive's sha256 in `HEX`; without it, ARCHIVE.sha256 must be beside the archive")
	force := fs.Bool("force", false, "reinstall even when a working installation is there")
	rest, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(rest) != 1 || rest[0] != "python" {
		fmt.Fprintln(stderr, "flowrun sandbox install: name what to install: flowrun sandbox install python [--from DIR|ARCHIVE]")
		return exitInvalid
	}
	start := time.Now()
	info, err := sandbox.InstallPython(ctx, sandbox.InstallOptions{From: *from, SHA256: *sum, Force: *force, Stdout: stdout})
	if err != nil {
		fmt.Fprintf(stderr, "flowrun sandbox install python: %s\n", explain(err))
		return exitFailed
	}
	if info.Kept {
		fmt.Fprintln(stdout, "(flowrun sandbox install python --force reinstalls it)")
	}
	if d := time.Since(start); d > 2*time.Second {
		fmt.Fprintf(stdout, "python.wasm %s, stdlib %s in %d files (%s)\n",
			figures.Bytes(info.WasmBytes), figures.Bytes(info.StdlibBytes), info.StdlibFiles, d.Round(time.Second))
	}
	return exitOK
}

func sandboxExportCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sandbox export", "flowrun sandbox export [-o FILE]\n\n"+
		"Writes the installed CPython "+sandbox.PythonVersion+" for WASI ("+sandbox.PythonDir()+")\n"+
		"as one .tar.gz, and its sha256 in FILE.sha256 beside it. The same installation\n"+
		"always gives the same bytes. On another machine, any OS:\n"+
		"  flowrun sandbox install python --from FILE")
	out := fs.String("o", sandbox.ExportTop+".tar.gz", "write the archive to `FILE`")
	if code, ok := parseFlagsOnly(fs, args, stdout, stderr); !ok {
		return code
	}
	py := sandbox.PythonStatus()
	if !py.Installed {
		fmt.Fprintf(stderr, "flowrun sandbox export: python %s is not installed (%s): run flowrun sandbox install python first\n", sandbox.PythonVersion, py.Problem)
		return exitFailed
	}
	sum, size, err := sandbox.Export(py.Dir, *out)
	if err != nil {
		fmt.Fprintf(stderr, "flowrun sandbox export: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "wrote %s (%s) and %s.sha256\nsha256 %s\n", *out, figures.Bytes(size), *out, sum)
	return exitOK
}

func sandboxStatusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sandbox status", "flowrun sandbox status [--json] [--verify]\n\nSays whether CPython for WASI is installed, and which Go toolchain builds\nthe go language's code.")
	asJSON := fs.Bool("json", false, "print the status as JSON")
	verify := fs.Bool("verify", false, "also run print(1) with the installed python.wasm (exit 1 if it fails), and a call from the pre-initialised interpreter")
	if code, ok := parseFlagsOnly(fs, args, stdout, stderr); !ok {
		return code
	}
	status := sandbox.CheckStatus(ctx, sandbox.PythonDir(), *verify)
	exit := exitOK
	if status.Err != nil {
		exit = exitFailed
	}
	if *asJSON {
		if c := writeJSON(stdout, status.JSON()); c != exitOK {
			return c
		}
		return exit
	}
	py, verified, warm := status.Python, status.Verified, status.WarmStart
	if py.Installed {
		fmt.Fprintf(stdout, "python %s: installed in %s\n", sandbox.PythonVersion, py.Dir)
		fmt.Fprintf(stdout, "  python.wasm  %s\n", figures.Bytes(py.WasmBytes))
		fmt.Fprintf(stdout, "  stdlib       %s in %d files\n", figures.Bytes(py.StdlibBytes), py.StdlibFiles)
		pk := make([]string, len(py.Packages))
		for i, x := range py.Packages {
			pk[i] = x.Name + " " + x.Version
		}
		fmt.Fprintf(stdout, "  packages     %s\n", strings.Join(pk, ", "))
		for _, x := range py.Absent {
			fmt.Fprintf(stdout, "  absent       %s: %s\n", x.Name, x.Why)
		}
		if py.Outdated != "" {
			fmt.Fprintf(stdout, "  outdated     %s: run flowrun sandbox install python\n", py.Outdated)
		}
		if py.Snapshot {
			fmt.Fprintln(stdout, "  calls        start from a pre-initialised interpreter (python-snapshot.wasm)")
		} else {
			fmt.Fprintln(stdout, "  calls        start CPython each time (no python-snapshot.wasm): run flowrun sandbox install python --force for warm calls")
		}
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
		if warm != "" {
			fmt.Fprintf(stdout, "  warm start   %s\n", warm)
		}
	} else {
		fmt.Fprintf(stdout, "python %s: not installed (%s): run flowrun sandbox install python\n", sandbox.PythonVersion, py.Problem)
	}
	if status.GoPath != "" {
		fmt.Fprintf(stdout, "go: %s (%s), builds to wasip1\n", status.GoVersion, status.GoPath)
	} else {
		fmt.Fprintln(stdout, "go: no go toolchain on PATH: the go language needs one")
	}
	return exit
}

// parseFlagsOnly parses a command that takes flags and no arguments.
func parseFlagsOnly(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (int, bool) {
	rest, code, ok := parseFlags(fs, args, stdout, stderr)
	if ok && len(rest) > 0 {
		fmt.Fprintf(stderr, "flowrun %s: unexpected %q\n", fs.Name(), rest[0])
		return exitInvalid, false
	}
	return code, ok
}
