package sandbox

import (
	"context"
	"errors"
)

// Status is what the sandbox has installed and, when checked, whether it
// works.
type Status struct {
	Python PythonInfo
	// Verified is "ok" or why the installed python.wasm failed to run
	// print(1); WarmStart is "ok" and whether calls reuse instances, or
	// why calls start cold. Each is "" when it was not checked.
	Verified, WarmStart string
	// Err is why a check failed: the installation does not work, or
	// there is none to check.
	Err error
	// GoPath and GoVersion are the Go toolchain that builds the go
	// language's code; GoPath is "" when there is none.
	GoPath, GoVersion string
}

// CheckStatus reports what is installed in dir and which Go toolchain is
// on PATH. With verify it also runs print(1) with the installed
// python.wasm and, when python-snapshot.wasm is there, a call from the
// pre-initialised interpreter; verifying when nothing is installed fails.
func CheckStatus(ctx context.Context, dir string, verify bool) Status {
	s := Status{Python: PythonStatusAt(dir)}
	s.GoPath, s.GoVersion = GoToolchain(ctx)
	switch {
	case !verify:
		return s
	case !s.Python.Installed:
		s.Err = errors.New(s.Python.Problem)
		return s
	}
	s.Verified = "ok"
	if err := VerifyPython(ctx, dir); err != nil {
		s.Err, s.Verified = err, err.Error()
		return s
	}
	if !s.Python.Snapshot {
		return s
	}
	// A snapshot that cannot be used leaves calls cold: slower, not wrong.
	cold, noReuse, err := WarmStart(ctx, dir)
	switch {
	case err != nil:
		s.Err, s.Verified = err, err.Error()
	case cold != "":
		s.WarmStart = "unavailable, calls start cold: " + cold
	case noReuse != "":
		s.WarmStart = "ok, a new instance for every call: " + noReuse
	default:
		s.WarmStart = "ok, a call's instance serves the next when it is back to the image"
	}
	return s
}

// JSON is the status as `flowrun sandbox status --json` prints it: the
// python installation (see PythonInfo.JSON) with what was checked, and
// the go toolchain.
func (s Status) JSON() map[string]any {
	p := s.Python.JSON()
	if s.Verified != "" {
		p["verify"] = s.Verified
	}
	if s.WarmStart != "" {
		p["warm_start"] = s.WarmStart
	}
	g := map[string]any{"available": s.GoPath != ""}
	if s.GoPath != "" {
		g["path"], g["version"] = s.GoPath, s.GoVersion
	}
	return map[string]any{"python": p, "go": g}
}

// JSON is the installation as `flowrun sandbox status --json` and other
// programs read it: version, directory, whether it is installed (or the
// problem), and when it is, its sizes, snapshot, manifest, packages (name
// to version), the packages it lacks (name to why) and why it is
// outdated, if it is.
func (i PythonInfo) JSON() map[string]any {
	p := map[string]any{
		"version":   PythonVersion,
		"dir":       i.Dir,
		"installed": i.Installed,
	}
	if i.Problem != "" {
		p["problem"] = i.Problem
	}
	if !i.Installed {
		return p
	}
	p["wasm_bytes"] = i.WasmBytes
	p["stdlib_bytes"] = i.StdlibBytes
	p["stdlib_files"] = i.StdlibFiles
	p["snapshot"] = i.Snapshot
	p["manifest"] = i.Manifest
	pk := map[string]string{}
	for _, x := range i.Packages {
		pk[x.Name] = x.Version
	}
	p["packages"] = pk
	if len(i.Absent) > 0 {
		absent := map[string]string{}
		for _, x := range i.Absent {
			absent[x.Name] = x.Why
		}
		p["absent"] = absent
	}
	if i.Outdated != "" {
		p["outdated"] = i.Outdated
	}
	return p
}
