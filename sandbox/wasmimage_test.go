package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
)

// counterModule is a tiny reactor: one page of memory whose byte 16 a data
// segment sets to 'a', a mutable global starting at 100, init (byte 16 =
// 'X', global = 7), poke (byte 16 = 'Z', global = 9), and get, which
// returns global*1000 + byte 16.
func counterModule() []byte {
	store := func(b, g byte) []byte {
		code := appendS64([]byte{0x41, 0x10, 0x41}, int64(b))            // mem[16] = b
		return append(code, 0x3a, 0x00, 0x00, 0x41, g, 0x24, 0x00, 0x0b) // global 0 = g
	}
	get := []byte{0x23, 0x00, 0x41, 0xe8, 0x07, 0x6c, 0x41, 0x10, 0x2d, 0x00, 0x00, 0x6a, 0x0b}
	fn := func(code []byte) []byte { return append(uleb(len(code)+1), append([]byte{0x00}, code...)...) }
	return bytes.Join([][]byte{
		wasmHeader,
		wasmSection(1, []byte{0x02, 0x60, 0x00, 0x00, 0x60, 0x00, 0x01, 0x7f}),
		wasmSection(3, []byte{0x03, 0x00, 0x00, 0x01}),
		wasmSection(5, []byte{0x01, 0x00, 0x01}),
		wasmSection(6, []byte{0x01, 0x7f, 0x01, 0x41, 0xe4, 0x00, 0x0b}), // mut i32 = 100
		wasmSection(7, []byte{0x04}, wasmName("memory"), []byte{0x02, 0x00}, wasmName("init"), []byte{0x00, 0x00},
			wasmName("poke"), []byte{0x00, 0x01}, wasmName("get"), []byte{0x00, 0x02}),
		wasmSection(10, []byte{0x03}, fn(store('X', 7)), fn(store('Z', 9)), fn(get)),
		wasmSection(11, []byte{0x01, 0x00, 0x41, 0x10, 0x0b, 0x01, 'a'}),
	}, nil)
}

// TestSnapshotModule saves a module's state after init and starts fresh
// instances from it: each sees init's memory and global, not the data
// segment's or the global's first value, and not what another instance
// wrote.
func TestSnapshotModule(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	layout, err := parseWasm(counterModule())
	if err != nil {
		t.Fatal(err)
	}
	initMod, err := rt.InstantiateWithConfig(ctx, layout.withGlobalExports(), wazero.NewModuleConfig().WithName("init"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := initMod.ExportedFunction("init").Call(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := initMod.Memory().Grow(1); !ok {
		t.Fatal("growing the memory failed")
	}
	hdr := &imageHeader{Format: snapshotFormat, Key: "k", Globals: map[int]uint64{0: initMod.ExportedGlobal(globalExportName(0)).Get()}}
	memory, _ := initMod.Memory().Read(0, initMod.Memory().Size())
	sum := sha256.Sum256(memory)
	hdr.MemoryBytes, hdr.MemorySHA256 = uint64(len(memory)), hex.EncodeToString(sum[:])
	path := filepath.Join(t.TempDir(), "k.img")
	if err := writeImage(path, hdr, memory); err != nil {
		t.Fatal(err)
	}
	f, hdr, err := openImage(path, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := layout.fromSnapshot(uint32(hdr.MemoryBytes>>16), hdr.Globals)
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := rt.CompileModule(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	img := &pythonImage{module: compiled, memory: f, size: hdr.MemoryBytes}
	for i, poke := range []bool{true, true, false} {
		mem := &guestMemory{limit: 1 << 20, image: img}
		mod, err := rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, mem), compiled, wazero.NewModuleConfig().WithName(""))
		if err != nil {
			t.Fatal(err)
		}
		got, err := mod.ExportedFunction("get").Call(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != 7*1000+'X' || mod.Memory().Size() != 2<<16 {
			t.Fatalf("instance %d starts with get() = %d and %d bytes of memory, want %d and %d", i, got[0], mod.Memory().Size(), 7*1000+'X', 2<<16)
		}
		if poke {
			if _, err := mod.ExportedFunction("poke").Call(ctx); err != nil {
				t.Fatal(err)
			}
		}
		mod.Close(ctx)
	}
	if _, _, err := openImage(path, "k"); err != nil {
		t.Fatalf("an instance's writes reached the image file: %v", err)
	}
	// The image file changed after it was checked reaches no call: they
	// start from the copy that was checked.
	tamper(t, path, 16, 'Q')
	if got := getAfterInit(t, ctx, rt, compiled, img); got != 7*1000+'X' {
		t.Fatalf("after the image file changed, an instance starts with get() = %d, want %d", got, 7*1000+'X')
	}
	// Below the image's size, the memory limit refuses it.
	mem := &guestMemory{limit: 1 << 16, image: img}
	inst := newInstance(&job{MemoryMB: 1, MaxOutput: 1024}, mem)
	defer inst.close(ctx)
	if err := inst.start(ctx, rt, compiled, wazero.NewModuleConfig().WithName("")); err == nil || !mem.refused {
		t.Fatalf("an image larger than the limit: err %v, refused %v", err, mem.refused)
	}
}

func TestParseWasmRefuses(t *testing.T) {
	withStart := append(counterModule(), wasmSection(8, []byte{0x00})...)
	withDataCount := append(append([]byte(nil), wasmHeader...), wasmSection(12, []byte{0x01})...)
	for name, b := range map[string][]byte{
		"a start function": withStart,
		"bulk memory":      withDataCount,
		"no memory":        wasmHeader,
		"not wasm":         []byte("hello"),
	} {
		if _, err := parseWasm(b); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// tamper overwrites the byte at offset off of the image file's memory, in
// place, as another process of the same user could.
func tamper(t *testing.T, path string, off int64, b byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{b}, imageHeaderSize+off); err != nil {
		t.Fatal(err)
	}
}

func getAfterInit(t *testing.T, ctx context.Context, rt wazero.Runtime, compiled wazero.CompiledModule, img *pythonImage) uint64 {
	t.Helper()
	mem := &guestMemory{limit: 1 << 20, image: img}
	mod, err := rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, mem), compiled, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(ctx)
	got, err := mod.ExportedFunction("get").Call(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return got[0]
}

// TestTableWritesRefuseReuse: code that can change a table or an element
// segment is found wherever it is, past any instruction's immediates;
// code that only reads them is not; a body the walk cannot read to its
// end is refused too.
func TestTableWritesRefuseReuse(t *testing.T) {
	// Each body is a function's locals and instructions, before its end.
	v128 := append([]byte{0xfd, 0x0c}, make([]byte, 16)...)
	quiet := [][]byte{
		{0x00}, // no locals
		{0x01, 0x02, 0x7f, 0x41, 0xff, 0x7f, 0x1a}, // locals, i32.const -1, drop
		append(append([]byte{0x00}, v128...), 0x1a),
		{0x00, 0x02, 0x40, 0x41, 0x00, 0x11, 0x00, 0x00, 0x0b},                         // block, call_indirect
		{0x00, 0x41, 0x00, 0x25, 0x00, 0x1a, 0xfc, 0x10, 0x00, 0x1a},                   // table.get, table.size
		{0x00, 0x44, 0, 0, 0, 0, 0, 0, 0x26, 0, 0x1a, 0x41, 0, 0x28, 0x02, 0x26, 0x1a}, // 0x26 inside immediates
	}
	writes := [][]byte{
		{0x00, 0x41, 0x00, 0xd0, 0x70, 0x26, 0x00},                // table.set
		{0x00, 0xd0, 0x70, 0x41, 0x01, 0xfc, 0x0f, 0x00, 0x1a},    // table.grow
		{0x00, 0xfc, 0x0d, 0x00},                                  // elem.drop
		{0x00, 0x41, 0, 0x41, 0, 0x41, 0, 0xfc, 0x0c, 0x00, 0x00}, // table.init
		{0x00, 0x41, 0, 0x41, 0, 0x41, 0, 0xfc, 0x0e, 0x00, 0x00}, // table.copy
		{0x00, 0x41, 0, 0xd0, 0x70, 0x41, 0, 0xfc, 0x11, 0x00},    // table.fill
		{0x00, 0x02},             // cut short
		{0x00, 0x41, 0x00, 0xfe}, // an instruction the walk does not know
	}
	layout := func(body []byte) *wasmLayout {
		fn := append(appendU32(nil, uint32(len(body)+1)), append(body, 0x0b)...)
		code := append(appendU32(nil, 2), 0x02, 0x00, 0x0b) // a first, empty function
		return &wasmLayout{sections: []moduleSection{{id: secCode, body: append(code, fn...)}}}
	}
	for i, b := range quiet {
		if err := layout(b).tableWrites(); err != nil {
			t.Errorf("quiet body %d: %v", i, err)
		}
	}
	for i, b := range writes {
		err := layout(b).tableWrites()
		if err == nil || !strings.HasPrefix(err.Error(), "function 1: ") {
			t.Errorf("body %d: %v, want function 1 refused", i, err)
		}
	}
}
