package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/flowrun/flowrun/sandbox/bounds"
)

// A Python call starts from a pre-initialised interpreter (docs/sandbox.md,
// "Warm calls"): python-snapshot.wasm, CPython built as a reactor, runs
// flowrun_init once (CPython's start-up, the harness, numpy when the build
// has it), and its linear memory and mutable globals are saved in the cache
// as an image. Each call is a fresh instance of a module rewritten to start
// from that image (wasmimage.go) whose memory is a private copy-on-write
// mapping of the saved one, entered at flowrun_call: it pays nothing for
// start-up and shares nothing with other calls, which write only their own
// copies of the pages they touch. What calls map is the worker's own copy
// of the image's memory, checked against its checksum after copying
// (imageCopy): a change to the file afterwards reaches no call.

// snapshotWasm is the interpreter built as a reactor by build.sh.
const snapshotWasm = "python-snapshot.wasm"

// snapshotFormat changes whenever what an image holds, or how it is made,
// changes, so that older images are not used.
const snapshotFormat = 1

// imageWarmUp runs after the harness, before the snapshot: numpy, when the
// build has it, is imported once here rather than by every call that uses
// it, and every object alive is moved out of the garbage collector's sight
// (gc.freeze), so that a call's collections scan only what the call made.
const imageWarmUp = `
try:
    import numpy
except ImportError:
    pass
import gc
gc.collect()
gc.freeze()
`

// imageHeaderSize is the room for an image file's header; the memory
// follows it, aligned for mapping.
const imageHeaderSize = 1 << 16

// imageHeader describes an image file's memory.
type imageHeader struct {
	Format int    `json:"format"`
	Key    string `json:"key"`
	// MemoryBytes is the saved memory's size; MemorySHA256 its checksum.
	MemoryBytes  uint64         `json:"memory_bytes"`
	MemorySHA256 string         `json:"memory_sha256"`
	Globals      map[int]uint64 `json:"globals"`
}

// pythonImage is a saved interpreter ready to start calls from.
type pythonImage struct {
	module wazero.CompiledModule
	memory *imageCopy // the image's memory, checked: calls map it
	path   string     // the image file it was copied from
	size   uint64     // the memory's size in bytes
	// globals are the saved values of the mutable globals, by index among
	// all the module's globals; noReuse says why each call needs a new
	// instance ("" when a call's may serve the next, see reuse.go).
	globals map[int]uint64
	noReuse string
}

// imageSource is what an image is made from, and the key that names it.
type imageSource struct {
	wasm   []byte
	stdlib string
	key    string
}

// imageKey names an image by everything that shapes it: the reactor
// module, the stdlib (file names, sizes and times), the harness and
// flowrun's own build, so that changing any of them makes a new image.
func imageKey(wasm []byte, stdlib string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "format %d\n", snapshotFormat)
	h.Write(wasm)
	fmt.Fprintf(h, "\nharness %d\n%s\n%s\n", len(pythonHarness), pythonHarness, imageWarmUp)
	if bi, ok := debug.ReadBuildInfo(); ok {
		fmt.Fprintf(h, "flowrun %s %s\n", bi.Main.Path, bi.Main.Version)
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" || s.Key == "vcs.time" || s.Key == "vcs.modified" {
				fmt.Fprintf(h, "%s=%s\n", s.Key, s.Value)
			}
		}
	}
	err := filepath.WalkDir(stdlib, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d %d\n", p, info.Size(), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("reading the stdlib %s: %w", stdlib, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// pythonImage returns the image for the installation in pythonDir, making
// it when the cache holds none that matches; nil (and no error) when the
// installation has no reactor build, which runs calls the cold way.
func (h *host) pythonImage(ctx context.Context, pythonDir, cacheDir string) (*pythonImage, error) {
	if img, ok := h.images[pythonDir]; ok {
		return img.image, img.err
	}
	img, err := h.loadImage(ctx, pythonDir, cacheDir)
	if h.images == nil {
		h.images = map[string]imageResult{}
	}
	// Kept, failure too, for the worker's life: making an image takes
	// seconds, and one that failed would fail again.
	h.images[pythonDir] = imageResult{img, err}
	return img, err
}

type imageResult struct {
	image *pythonImage
	err   error
}

func (h *host) loadImage(ctx context.Context, pythonDir, cacheDir string) (*pythonImage, error) {
	wasm, err := os.ReadFile(filepath.Join(pythonDir, snapshotWasm))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	_, stdlib, problem := pythonLayout(pythonDir)
	if problem != "" {
		return nil, errors.New(problem)
	}
	key, err := imageKey(wasm, stdlib)
	if err != nil {
		return nil, err
	}
	src := imageSource{wasm: wasm, stdlib: stdlib, key: key}
	path := filepath.Join(cacheDir, "python-images", key+".img")
	img, unusable, err := h.startImage(ctx, src, path)
	if unusable != nil {
		mem, hdr, err := h.makeImage(ctx, src, path)
		if err != nil {
			return nil, fmt.Errorf("making the interpreter snapshot: %w", err)
		}
		if img, err = h.imageModule(ctx, src, hdr); err != nil {
			mem.Close()
			return nil, err
		}
		img.memory = mem
	} else if err != nil {
		return nil, err
	}
	img.path = path
	return img, nil
}

// startImage starts calls from the image file at path: its memory is
// copied and checked while the module that starts from it compiles, which
// needs only the header. unusable says the file is missing, made for
// other sources, or does not match its checksum (then it is remade); err
// that the module did not compile.
func (h *host) startImage(ctx context.Context, src imageSource, path string) (img *pythonImage, unusable, err error) {
	f, hdr, err := openImageHeader(path, src.key)
	if err != nil {
		return nil, err, nil
	}
	type copied struct {
		mem *imageCopy
		err error
	}
	done := make(chan copied, 1)
	go func() {
		defer f.Close()
		mem, err := copyImageMemory(f, hdr)
		done <- copied{mem, err}
	}()
	img, err = h.imageModule(ctx, src, hdr)
	c := <-done
	switch {
	case c.err != nil:
		if img != nil {
			img.module.Close(ctx)
		}
		return nil, fmt.Errorf("image %s: %w", path, c.err), nil
	case err != nil:
		c.mem.Close()
		return nil, nil, err
	}
	img.memory = c.mem
	return img, nil, nil
}

// openImage reads the image file at path into a private copy and checks
// it: its header names key, and the copy of its memory matches the
// checksum. The file is closed: calls map the copy.
func openImage(path, key string) (*imageCopy, *imageHeader, error) {
	f, hdr, err := openImageHeader(path, key)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	mem, err := copyImageMemory(f, hdr)
	if err != nil {
		return nil, nil, fmt.Errorf("image %s: %w", path, err)
	}
	return mem, hdr, nil
}

// openImageHeader opens the image file at path and reads its header, which
// must name key; the file is left at the memory that follows.
func openImageHeader(path, key string) (*os.File, *imageHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	hdr, err := readImageHeader(f, key)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("image %s: %w", path, err)
	}
	return f, hdr, nil
}

func readImageHeader(f *os.File, key string) (*imageHeader, error) {
	head := make([]byte, imageHeaderSize)
	if _, err := io.ReadFull(f, head); err != nil {
		return nil, fmt.Errorf("reading its header: %w", err)
	}
	var hdr imageHeader
	if err := json.Unmarshal(bytes.TrimRight(head, "\x00"), &hdr); err != nil {
		return nil, fmt.Errorf("reading its header: %w", err)
	}
	if hdr.Format != snapshotFormat || hdr.Key != key {
		return nil, errors.New("made for another installation, harness or flowrun")
	}
	return &hdr, nil
}

// errChecksum says an image's memory is not the one its header describes.
var errChecksum = errors.New("its memory does not match its checksum")

// copyImageMemory copies the memory that follows the header in f and
// checks the copy, not the file, against the checksum, so that what is
// checked is what calls map.
func copyImageMemory(f *os.File, hdr *imageHeader) (*imageCopy, error) {
	mem, err := newImageCopy(f, hdr.MemoryBytes)
	if errors.Is(err, io.EOF) {
		return nil, errChecksum // shorter than its header says
	}
	if err != nil {
		return nil, fmt.Errorf("copying its memory: %w", err)
	}
	if n, _ := f.Read(make([]byte, 1)); n > 0 {
		mem.Close()
		return nil, errChecksum // longer
	}
	sum := sha256.New()
	if _, err := io.Copy(sum, io.NewSectionReader(mem, 0, int64(hdr.MemoryBytes))); err != nil {
		mem.Close()
		return nil, fmt.Errorf("reading its memory: %w", err)
	}
	if hex.EncodeToString(sum.Sum(nil)) != hdr.MemorySHA256 {
		mem.Close()
		return nil, errChecksum
	}
	return mem, nil
}

// makeImage runs flowrun_init in a throw-away instance and writes its
// memory and mutable globals to path, atomically, then opens it as a
// worker that found it would.
func (h *host) makeImage(ctx context.Context, src imageSource, path string) (*imageCopy, *imageHeader, error) {
	layout, err := parseWasm(src.wasm)
	if err != nil {
		return nil, nil, err
	}
	compiled, err := h.rt.CompileModule(ctx, layout.withGlobalExports())
	if err != nil {
		return nil, nil, fmt.Errorf("compiling %s: %w", snapshotWasm, err)
	}
	defer compiled.Close(ctx)
	stderr := &cappedBuffer{limit: 1 << 16}
	cfg := pythonModuleConfig(src.stdlib).
		WithStdin(strings.NewReader(pythonHarness + "\n" + imageWarmUp)).
		WithStdout(io.Discard).
		WithStderr(stderr).
		WithStartFunctions("_initialize")
	mem := &guestMemory{limit: uint64(bounds.MaxMemoryMB) << 20}
	mod, err := h.rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, mem), compiled, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("starting %s: %w%s", snapshotWasm, err, tail(stderr.buf.String()))
	}
	defer mod.Close(ctx)
	res, err := mod.ExportedFunction("flowrun_init").Call(ctx)
	if err != nil || res[0] != 0 {
		return nil, nil, fmt.Errorf("flowrun_init failed (%v)%s", err, tail(stderr.buf.String()))
	}
	hdr := &imageHeader{Format: snapshotFormat, Key: src.key, Globals: map[int]uint64{}}
	for i, g := range layout.globals {
		if g.mutable {
			hdr.Globals[i] = mod.ExportedGlobal(globalExportName(i)).Get()
		}
	}
	memory, _ := mod.Memory().Read(0, mod.Memory().Size())
	sum := sha256.Sum256(memory)
	hdr.MemoryBytes, hdr.MemorySHA256 = uint64(len(memory)), hex.EncodeToString(sum[:])
	if err := writeImage(path, hdr, memory); err != nil {
		return nil, nil, err
	}
	return openImage(path, src.key)
}

func writeImage(path string, hdr *imageHeader, memory []byte) error {
	head, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	if len(head) > imageHeaderSize {
		return fmt.Errorf("the image header is %d bytes, more than the %d it has room for", len(head), imageHeaderSize)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*.img")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(append(head, make([]byte, imageHeaderSize-len(head))...))
	if err == nil {
		_, err = tmp.Write(memory)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing the image %s: %w", path, err)
	}
	// Renamed into place whole: a worker reading the old file keeps it.
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	pruneImages(filepath.Dir(path), path)
	return nil
}

// imageMaxAge is how long an image other than the newest is kept: long
// enough for flowrun processes of another version, or with another
// installation, to keep theirs while they run; each flowrun build makes a
// new 20 MB image, which would otherwise pile up.
const imageMaxAge = 24 * time.Hour

// pruneImages removes the images in dir, but keep, made longer than
// imageMaxAge ago, and temporary files left by workers that died. A worker
// running calls from one has its own copy and needs the file no more.
func pruneImages(dir, keep string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		info, err := e.Info()
		if p == keep || err != nil || !info.Mode().IsRegular() || time.Since(info.ModTime()) < imageMaxAge {
			continue
		}
		if strings.HasSuffix(e.Name(), ".img") {
			_ = os.Remove(p)
		}
	}
}

// imageModule compiles the module that starts calls from the image.
func (h *host) imageModule(ctx context.Context, src imageSource, hdr *imageHeader) (*pythonImage, error) {
	layout, err := parseWasm(src.wasm)
	if err != nil {
		return nil, err
	}
	const page = 1 << 16
	if hdr.MemoryBytes%page != 0 {
		return nil, fmt.Errorf("the image's memory is %d bytes, not whole pages", hdr.MemoryBytes)
	}
	b, err := layout.fromSnapshot(uint32(hdr.MemoryBytes/page), hdr.Globals)
	if err != nil {
		return nil, err
	}
	// Walking CPython's 10 MB of code takes tens of milliseconds; it runs
	// while the module loads.
	walked := make(chan error, 1)
	go func() { walked <- layout.tableWrites() }()
	compiled, err := h.rt.CompileModule(ctx, b)
	tableErr := <-walked
	if err != nil {
		return nil, fmt.Errorf("compiling %s from its snapshot: %w", snapshotWasm, err)
	}
	img := &pythonImage{module: compiled, size: hdr.MemoryBytes, globals: map[int]uint64{}}
	for i, v := range hdr.Globals {
		img.globals[layout.importedGlobals+i] = v
	}
	if tableErr != nil {
		img.noReuse = "the module's code may change its table: " + tableErr.Error()
	}
	return img, nil
}

// pythonModuleConfig is what every Python instance sees: the stdlib,
// read-only, where CPython looks for it. Making the image and running a
// call must agree on it, as the image holds the file descriptors the
// initialisation found.
func pythonModuleConfig(stdlib string) wazero.ModuleConfig {
	// No WithEnv, WithSysWalltime or WithSysNanotime: the guest gets no
	// environment and a fixed clock. The image is made with wazero's fixed
	// random source (so its hash seed is the same everywhere); a call sets
	// its own (worker.go).
	return wazero.NewModuleConfig().
		WithName("").
		WithArgs(pythonArgs...).
		WithFSConfig(wazero.NewFSConfig().WithReadOnlyDirMount(stdlib, pythonGuestLib))
}
