package sandbox

import (
	"context"
	"path/filepath"
	"strings"
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
	absent, _ := got["absent"].(map[string]string)
	if why := absent["scipy.ndimage"]; !strings.Contains(why, "Fortran") || !strings.Contains(why, "LAPACK") {
		t.Errorf("absent %v: scipy.ndimage should be there, with why", got["absent"])
	}
}

// TestCheckStatus: without verify nothing runs; with it, a python.wasm
// that prints 1 is "ok", one that prints something else fails with why,
// and a missing installation fails without a verdict.
func TestCheckStatus(t *testing.T) {
	ctx := context.Background()
	good, bad := t.TempDir(), t.TempDir()
	fakePython(t, good, "1\n", PythonVersion)
	fakePython(t, bad, "2\n", PythonVersion)
	for _, c := range []struct {
		name, dir    string
		verify, fail bool
		verified     string
	}{
		{"unchecked", good, false, false, ""},
		{"works", good, true, false, "ok"},
		{"broken", bad, true, true, "*"},
		{"missing", filepath.Join(good, "none"), true, true, ""},
		{"missing, unchecked", filepath.Join(good, "none"), false, false, ""},
	} {
		s := CheckStatus(ctx, c.dir, c.verify)
		if (s.Err != nil) != c.fail || (c.verified == "*") != (s.Verified != "" && s.Verified != "ok") || (c.verified != "*" && s.Verified != c.verified) {
			t.Errorf("%s: verified %q, err %v; want %q, failing %v", c.name, s.Verified, s.Err, c.verified, c.fail)
		}
		p := s.JSON()["python"].(map[string]any)
		if v, ok := p["verify"]; ok != (s.Verified != "") || (ok && v != s.Verified) {
			t.Errorf("%s: JSON verify %v, want %q", c.name, v, s.Verified)
		}
		if s.WarmStart != "" {
			t.Errorf("%s: warm start %q checked with no snapshot", c.name, s.WarmStart)
		}
	}
}
