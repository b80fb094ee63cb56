package sandbox

// JSON is the installation as `flowrun sandbox status --json` and other
// programs read it: version, directory, whether it is installed (or the
// problem), and when it is, its sizes, snapshot, manifest, packages (name
// to version) and why it is outdated, if it is.
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
	if i.Outdated != "" {
		p["outdated"] = i.Outdated
	}
	return p
}
