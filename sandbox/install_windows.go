package sandbox

import "os/exec"

// stopGroupOnCancel leaves exec's default (kill the process) on Windows,
// where buildPython refuses before starting anything.
func stopGroupOnCancel(*exec.Cmd) {}
