//go:build unix

package promptfoo

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A named pipe, as a prompt file or as the configuration, is refused
// without waiting for a writer; /dev/zero is refused without reading it.
func TestConvertReadsOnlyRegularFiles(t *testing.T) {
	cfg := configIn(t, "prompts: [file://pipe.txt, 'Say {{x}}', file://ZERO]\n")
	dir := filepath.Dir(cfg)
	zero, err := filepath.Rel(dir, "/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, cfg, strings.Replace(mustRead(t, cfg), "ZERO", zero, 1))
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Convert(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := problems(res)
	for _, want := range []string{
		":1:11: prompt pipe.txt: not read: not a regular file (a named pipe)",
		":1:41: prompt " + zero + ": not read: it is outside the configuration's directory",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	for _, c := range []struct{ path, want string }{
		{filepath.Join(dir, "pipe.txt"), "not a regular file (a named pipe)"},
		{"/dev/zero", "not a regular file (a device)"},
	} {
		if _, err := Convert(context.Background(), c.path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("configuration %s: %v, want %q", c.path, err, c.want)
		}
	}
}
