package sandbox

import (
	"testing"
)

// TestPythonInfoJSON: a missing installation says its problem and no
// figures; an installed one has its figures and packages by name.
func TestPythonInfoJSON(t *testing.T) {
	missing := PythonInfo{Dir: "/x", Problem: "no /x/python.wasm"}.JSON()
	if missing["installed"] != false || missing["problem"] != "no /x/python.wasm" || missing["wasm_bytes"] != nil || missing["version"] != PythonVersion {
		t.Errorf("missing: %v", missing)
	}
	dir := t.TempDir()
	fakePython(t, dir, "1\n", PythonVersion)
	info := PythonStatusAt(dir)
	got := info.JSON()
	if got["installed"] != true || got["wasm_bytes"] != info.WasmBytes || got["problem"] != nil {
		t.Fatalf("installed: %v", got)
	}
	pk, _ := got["packages"].(map[string]string)
	for _, p := range info.Packages {
		if pk[p.Name] != p.Version {
			t.Errorf("packages %v, want %s %s", pk, p.Name, p.Version)
		}
	}
}
