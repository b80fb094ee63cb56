package confined

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowrun/flowrun/internal/confined/confinedtest"
)

// layout makes root/ (the pipeline directory) next to a secret file and
// a secret directory outside it, and returns root.
func layout(t *testing.T) string {
	t.Helper()
	top := t.TempDir()
	root := filepath.Join(top, "root")
	for _, d := range []string{root, filepath.Join(root, "sub"), filepath.Join(top, "private")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(top, "secret"), "SECRET")
	write(t, filepath.Join(top, "private", "key"), "SECRET")
	write(t, filepath.Join(root, "inside.txt"), "inside")
	return root
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symbolic links: %v", err)
	}
}

// TestHardening03ReadFileSymlinkRace swaps a file for a symbolic link to
// a file outside, over and over, while reading it: no read may return the
// outside file, whichever state each read catches.
func TestHardening03ReadFileSymlinkRace(t *testing.T) {
	root := layout(t)
	symlink(t, "../secret", filepath.Join(root, "link")) // skips where links cannot be made
	d := Dir{Root: root, MaxBytes: 1 << 20}
	name := filepath.Join(root, "f")
	write(t, name, "inside")

	stop := confinedtest.SwapWithLink(name, "../secret", "inside")
	// A read that catches the swap half way fails (outside, no such file,
	// a link loop); only the content read matters.
	var escapes, inside int
	for range 20000 {
		b, err := d.ReadFile(context.Background(), "f")
		switch {
		case err == nil && string(b) == "SECRET":
			escapes++
		case err == nil:
			inside++
		}
	}
	stop()
	if escapes > 0 {
		t.Fatalf("%d of 20000 reads returned the file outside the directory", escapes)
	}
	if inside == 0 {
		t.Fatal("no read saw the regular file: the race was not exercised")
	}
}

// countdown is a context that reports itself cancelled after n looks.
type countdown struct {
	context.Context
	n atomic.Int32
}

func (c *countdown) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestHardening04ReadFileCapAndCancel: a file over the cap is refused (or
// cut, for ReadHead) without being read whole, a named pipe is refused at
// once, and a cancelled context stops a read part way.
func TestHardening04ReadFileCapAndCancel(t *testing.T) {
	root := layout(t)
	big, err := os.Create(filepath.Join(root, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(20 << 20); err != nil {
		t.Fatal(err)
	}
	big.Close()
	d := Dir{Root: root, MaxBytes: 1 << 20, Limit: "limits.max_file_kb"}

	t.Run("cap", func(t *testing.T) {
		_, err := d.ReadFile(context.Background(), "big.bin")
		want := "file too large: the file holds 20 MiB, over the 1 MiB cap; raise limits.max_file_kb to read it"
		if !errors.Is(err, ErrTooLarge) || err.Error() != want {
			t.Fatalf("ReadFile = %v\nwant %s", err, want)
		}
		head, size, err := d.ReadHead(context.Background(), "big.bin")
		if err != nil || len(head) != 1<<20 || size != 20<<20 {
			t.Fatalf("ReadHead = %d bytes of %d, %v; want the first 1 MiB of 20 MiB", len(head), size, err)
		}
		if err := d.Check("big.bin"); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("Check = %v", err)
		}
	})

	t.Run("not regular", func(t *testing.T) {
		if _, err := d.ReadFile(context.Background(), "sub"); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "a directory") {
			t.Fatalf("a directory: %v", err)
		}
		fifo := filepath.Join(root, "pipe")
		if !makeFIFO(t, fifo) {
			t.Skip("no named pipes here")
		}
		done := make(chan error, 1)
		go func() {
			_, err := d.ReadFile(context.Background(), "pipe")
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "a named pipe") {
				t.Fatalf("a named pipe: %v", err)
			}
		case <-time.After(5 * time.Second):
			// Give the blocked reader a writer, so that it returns.
			if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				w.Close()
			}
			<-done
			t.Fatal("reading a named pipe blocked")
		}
	})

	t.Run("cancel", func(t *testing.T) {
		all := Dir{Root: root, MaxBytes: 64 << 20}
		ctx := &countdown{Context: context.Background()}
		ctx.n.Store(3)
		b, err := all.ReadFile(ctx, "big.bin")
		if !errors.Is(err, context.Canceled) || b != nil {
			t.Fatalf("a read cancelled part way: %d bytes, %v", len(b), err)
		}
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		if _, _, err := all.ReadHead(cancelled, "inside.txt"); !errors.Is(err, context.Canceled) {
			t.Fatalf("a read under a cancelled context: %v", err)
		}
	})
}

// TestHardening13ReadFileSameError: whatever leads outside, the error is
// the same whether or not the file there exists, and a name inside reads.
func TestHardening13ReadFileSameError(t *testing.T) {
	root := layout(t)
	top := filepath.Dir(root)
	symlink(t, "../secret", filepath.Join(root, "to_secret"))
	symlink(t, "../nothing", filepath.Join(root, "to_nothing"))
	symlink(t, filepath.Join(top, "private"), filepath.Join(root, "private"))
	symlink(t, "sub/../inside.txt", filepath.Join(root, "inside_link"))
	d := Dir{Root: root, Base: "sub", MaxBytes: 1 << 20}
	pairs := [][2]string{ // an existing file outside, a missing one
		{"../../secret", "../../nothing"},
		{filepath.Join(top, "secret"), filepath.Join(top, "nothing")},
		{"../to_secret", "../to_nothing"},
		{"../private/key", "../private/nothing"},
		{"../../root/inside.txt", "../../root/nothing"},
	}
	for _, p := range pairs {
		_, errExists := d.ReadFile(context.Background(), p[0])
		_, errMissing := d.ReadFile(context.Background(), p[1])
		if !errors.Is(errExists, ErrOutside) || errExists.Error() != errMissing.Error() {
			t.Errorf("%s: %v\n%s: %v\nwant the same %q for both", p[0], errExists, p[1], errMissing, ErrOutside)
		}
		if err := d.Check(p[0]); !errors.Is(err, ErrOutside) {
			t.Errorf("Check(%s) = %v", p[0], err)
		}
	}
	for _, name := range []string{"../inside.txt", "../inside_link", filepath.Join(root, "inside.txt")} {
		if b, err := d.ReadFile(context.Background(), name); err != nil || string(b) != "inside" {
			t.Errorf("%s = %q, %v; want the file inside", name, b, err)
		}
	}
	if _, err := d.ReadFile(context.Background(), "missing.txt"); !errors.Is(err, os.ErrNotExist) || err.Error() != "no such file in the pipeline directory" {
		t.Errorf("a missing file inside: %v", err)
	}
}
