package sandbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// This file rewrites a WebAssembly module for the pre-initialised
// interpreter (snapshot.go), as Wizer does: one copy exports the module's
// mutable globals so the host can read them after initialising, and
// another starts from the saved state, its globals' initial values being
// the saved ones, its memory as large as the saved memory and its data
// segments gone (the saved memory already holds them, changed as the
// initialisation left them).

// Section ids of the binary format.
const (
	secImport    = 2
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secData      = 11
	secDataCount = 12
)

// moduleSection is one section of a module: its id and its contents.
type moduleSection struct {
	id   byte
	body []byte
}

// wasmGlobal is one global the module defines.
type wasmGlobal struct {
	valType byte // 0x7f i32, 0x7e i64, 0x7d f32, 0x7c f64
	mutable bool
}

// wasmLayout is what the rewriting needs to know of a module.
type wasmLayout struct {
	sections        []moduleSection
	importedGlobals int
	globals         []wasmGlobal
}

// globalExportName names the export of the module's i-th defined global in
// the copy that is initialised.
func globalExportName(i int) string { return "flowrun.global." + strconv.Itoa(i) }

var wasmHeader = []byte{0, 'a', 's', 'm', 1, 0, 0, 0}

// parseWasm reads a module's sections and what its globals are. It refuses
// a module that cannot start from a saved memory: one with a start
// function (it would run again), with passive data (bulk memory
// instructions read the data segments this rewriting removes), or with
// other than one memory of its own.
func parseWasm(b []byte) (*wasmLayout, error) {
	if !bytes.HasPrefix(b, wasmHeader) {
		return nil, errors.New("not a WebAssembly 1.0 module")
	}
	l := &wasmLayout{}
	r := &wasmReader{b: b[len(wasmHeader):]}
	memories := 0
	for !r.done() {
		id := r.byte()
		size := r.u32()
		body := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("reading section %d: %w", id, r.err)
		}
		l.sections = append(l.sections, moduleSection{id: id, body: body})
		var err error
		switch id {
		case secStart:
			return nil, errors.New("the module has a start function")
		case secDataCount:
			return nil, errors.New("the module uses bulk memory (it has a data count section)")
		case secImport:
			var importedMemories int
			l.importedGlobals, importedMemories, err = countImports(body)
			memories += importedMemories
		case secMemory:
			var n uint32
			n, err = (&wasmReader{b: body}).count()
			memories += int(n)
		case secGlobal:
			l.globals, err = readGlobals(body)
		}
		if err != nil {
			return nil, fmt.Errorf("reading section %d: %w", id, err)
		}
	}
	if memories != 1 || l.section(secMemory) == nil {
		return nil, errors.New("the module does not define exactly one memory of its own")
	}
	return l, nil
}

func (l *wasmLayout) section(id byte) []byte {
	for _, s := range l.sections {
		if s.id == id {
			return s.body
		}
	}
	return nil
}

// withGlobalExports is the module with each mutable global it defines
// exported as globalExportName(i).
func (l *wasmLayout) withGlobalExports() []byte {
	var entries [][]byte
	var n uint32
	if body := l.section(secExport); body != nil {
		r := &wasmReader{b: body}
		n = r.u32()
		entries = append(entries, r.b[r.off:])
	}
	for i, g := range l.globals {
		if !g.mutable {
			continue
		}
		name := globalExportName(i)
		e := appendU32(nil, uint32(len(name)))
		e = append(e, name...)
		e = append(e, 0x03) // a global
		entries = append(entries, appendU32(e, uint32(l.importedGlobals+i)))
		n++
	}
	body := appendU32(nil, n)
	for _, e := range entries {
		body = append(body, e...)
	}
	return l.encode(func(s moduleSection) []byte {
		if s.id == secExport {
			return body
		}
		return s.body
	}, secExport, body)
}

// fromSnapshot is the module starting from a saved state: memory of pages
// 64 KiB pages at least, no data segments, and each mutable global's
// initial value the saved one (values[i] for the i-th defined global, as
// api.Global.Get returns it).
func (l *wasmLayout) fromSnapshot(pages uint32, values map[int]uint64) ([]byte, error) {
	globals, err := l.savedGlobals(values)
	if err != nil {
		return nil, err
	}
	memory, err := withMinimum(l.section(secMemory), pages)
	if err != nil {
		return nil, err
	}
	return l.encode(func(s moduleSection) []byte {
		switch s.id {
		case secData:
			return nil
		case secGlobal:
			return globals
		case secMemory:
			return memory
		}
		return s.body
	}, 0, nil), nil
}

// encode writes the sections, each with the body body returns (nil drops
// it), and a section of id add with body addBody when there was none.
func (l *wasmLayout) encode(body func(moduleSection) []byte, add byte, addBody []byte) []byte {
	out := append([]byte(nil), wasmHeader...)
	added := add == 0
	for _, s := range l.sections {
		if !added && s.id != 0 && s.id > add {
			out = appendSection(out, add, addBody)
			added = true
		}
		if s.id == add {
			added = true
		}
		if b := body(s); b != nil {
			out = appendSection(out, s.id, b)
		}
	}
	if !added {
		out = appendSection(out, add, addBody)
	}
	return out
}

func appendSection(out []byte, id byte, body []byte) []byte {
	out = append(out, id)
	out = appendU32(out, uint32(len(body)))
	return append(out, body...)
}

// savedGlobals is the global section with the mutable globals' initial
// values replaced by the saved ones.
func (l *wasmLayout) savedGlobals(values map[int]uint64) ([]byte, error) {
	r := &wasmReader{b: l.section(secGlobal)}
	n := r.u32()
	out := appendU32(nil, n)
	for i := 0; i < int(n); i++ {
		start := r.off
		g := wasmGlobal{valType: r.byte(), mutable: r.byte() == 1}
		r.constExpr()
		if r.err != nil {
			return nil, r.err
		}
		v, saved := values[i]
		if !g.mutable || !saved {
			if g.mutable {
				return nil, fmt.Errorf("no saved value for mutable global %d", i)
			}
			out = append(out, r.b[start:r.off]...)
			continue
		}
		out = append(out, g.valType, 1)
		switch g.valType {
		case 0x7f:
			out = appendS64(append(out, 0x41), int64(int32(uint32(v))))
		case 0x7e:
			out = appendS64(append(out, 0x42), int64(v))
		case 0x7d:
			out = binary.LittleEndian.AppendUint32(append(out, 0x43), uint32(v))
		case 0x7c:
			out = binary.LittleEndian.AppendUint64(append(out, 0x44), v)
		default:
			return nil, fmt.Errorf("mutable global %d has type 0x%x, which a snapshot cannot hold", i, g.valType)
		}
		out = append(out, 0x0b)
	}
	return out, nil
}

// withMinimum is a memory section whose one memory is at least pages large.
func withMinimum(body []byte, pages uint32) ([]byte, error) {
	r := &wasmReader{b: body}
	r.count()
	flags := r.byte()
	minimum := r.u32()
	rest := r.b[r.off:]
	if r.err != nil {
		return nil, r.err
	}
	if flags&0x01 != 0 {
		most := (&wasmReader{b: rest}).u32()
		if pages > most {
			return nil, fmt.Errorf("the saved memory (%d pages) is larger than the module's maximum (%d)", pages, most)
		}
	}
	out := appendU32(nil, 1)
	out = append(out, flags)
	out = appendU32(out, max(minimum, pages))
	return append(out, rest...), nil
}

// countImports counts the globals and memories a module imports.
func countImports(body []byte) (globals, memories int, err error) {
	r := &wasmReader{b: body}
	n := r.u32()
	for i := 0; i < int(n) && r.err == nil; i++ {
		r.bytes(int(r.u32())) // module
		r.bytes(int(r.u32())) // name
		switch r.byte() {
		case 0x00: // function
			r.u32()
		case 0x01: // table
			r.byte()
			r.limits()
		case 0x02:
			r.limits()
			memories++
		case 0x03:
			r.byte()
			r.byte()
			globals++
		default:
			return 0, 0, fmt.Errorf("import %d has an unknown kind", i)
		}
	}
	return globals, memories, r.err
}

func readGlobals(body []byte) ([]wasmGlobal, error) {
	r := &wasmReader{b: body}
	n := r.u32()
	var gs []wasmGlobal
	for i := 0; i < int(n) && r.err == nil; i++ {
		gs = append(gs, wasmGlobal{valType: r.byte(), mutable: r.byte() == 1})
		r.constExpr()
	}
	return gs, r.err
}

// wasmReader reads the binary format; the first error sticks.
type wasmReader struct {
	b   []byte
	off int
	err error
}

var errTruncated = errors.New("truncated module")

func (r *wasmReader) done() bool { return r.err != nil || r.off >= len(r.b) }

func (r *wasmReader) byte() byte {
	if r.err != nil || r.off >= len(r.b) {
		r.err = errTruncated
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *wasmReader) bytes(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b)-r.off {
		r.err = errTruncated
		return nil
	}
	r.off += n
	return r.b[r.off-n : r.off]
}

func (r *wasmReader) u32() uint32 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 || v > math.MaxUint32 {
		r.err = errTruncated
		return 0
	}
	r.off += n
	return uint32(v)
}

// skipLEB skips a LEB128 number, signed or not.
func (r *wasmReader) skipLEB() {
	for r.err == nil && r.byte()&0x80 != 0 {
	}
}

func (r *wasmReader) count() (uint32, error) {
	n := r.u32()
	return n, r.err
}

func (r *wasmReader) limits() {
	if r.byte()&0x01 != 0 {
		r.u32()
	}
	r.u32()
}

// constExpr skips a constant expression, up to and including its end.
func (r *wasmReader) constExpr() {
	for r.err == nil {
		switch op := r.byte(); op {
		case 0x0b:
			return
		case 0x41, 0x42:
			r.skipLEB()
		case 0x43:
			r.bytes(4)
		case 0x44:
			r.bytes(8)
		case 0x23, 0xd2: // global.get, ref.func
			r.u32()
		case 0xd0: // ref.null
			r.byte()
		default:
			r.err = fmt.Errorf("unsupported instruction 0x%x in a constant expression", op)
		}
	}
}

func appendU32(b []byte, v uint32) []byte { return binary.AppendUvarint(b, uint64(v)) }

// appendS64 appends v in signed LEB128, as the binary format's constants are.
func appendS64(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// secCode is the code section's id.
const secCode = 10

// tableWrites says why calls cannot share an instance of the module, whose
// table a kept instance would carry from one call to the next: the first
// instruction in its code that changes a table or an element segment
// (table.set, table.grow, table.fill, table.copy, table.init, elem.drop),
// or one the walk does not know; nil when there is none. Element segments
// are reached only through those, and data segments are refused anyway.
func (l *wasmLayout) tableWrites() error {
	r := &wasmReader{b: l.section(secCode)}
	n := r.u32()
	for i := 0; i < int(n) && r.err == nil; i++ {
		body := &wasmReader{b: r.bytes(int(r.u32()))}
		if r.err != nil {
			break
		}
		if err := body.tableWrites(); err != nil {
			return fmt.Errorf("function %d: %w", l.importedFunctions()+i, err)
		}
	}
	return r.err
}

// importedFunctions counts the functions the module imports.
func (l *wasmLayout) importedFunctions() int {
	r := &wasmReader{b: l.section(secImport)}
	n := r.u32()
	funcs := 0
	for i := 0; i < int(n) && r.err == nil; i++ {
		r.bytes(int(r.u32()))
		r.bytes(int(r.u32()))
		switch r.byte() {
		case 0x00:
			funcs++
			r.u32()
		case 0x01:
			r.byte()
			r.limits()
		case 0x02:
			r.limits()
		case 0x03:
			r.byte()
			r.byte()
		}
	}
	return funcs
}

// tableWrites walks one function body (its locals, then its
// instructions), which must end exactly at its last end: a walk that
// lost its way would not.
func (r *wasmReader) tableWrites() error {
	for locals := r.u32(); locals > 0 && r.err == nil; locals-- {
		r.u32()
		r.byte()
	}
	last := byte(0)
	for !r.done() {
		op := r.byte()
		last = op
		switch {
		case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
			r.blockType()
		case op == 0x0c || op == 0x0d || op == 0x10 || op == 0x12 || (op >= 0x20 && op <= 0x25) || op == 0xd2:
			r.u32() // br, br_if, call, return_call, local.*, global.*, table.get, ref.func
		case op == 0x0e: // br_table
			for n := r.u32() + 1; n > 0 && r.err == nil; n-- {
				r.u32()
			}
		case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
			r.u32()
			r.u32()
		case op == 0x1c: // select with types
			r.bytes(int(r.u32()))
		case op == 0x26:
			return errors.New("it uses table.set")
		case op >= 0x28 && op <= 0x3e: // loads and stores
			r.u32()
			r.u32()
		case op == 0x3f || op == 0x40 || op == 0xd0: // memory.size, memory.grow, ref.null
			r.byte()
		case op == 0x41 || op == 0x42:
			r.skipLEB()
		case op == 0x43:
			r.bytes(4)
		case op == 0x44:
			r.bytes(8)
		case op == 0xfc:
			if err := r.miscOp(); err != nil {
				return err
			}
		case op == 0xfd:
			r.vectorOp()
		case op <= 0x01 || op == 0x05 || op == 0x0b || op == 0x0f || op == 0x1a || op == 0x1b || (op >= 0x45 && op <= 0xc4) || op == 0xd1:
		default:
			return fmt.Errorf("it uses the instruction 0x%x, which the check does not know", op)
		}
	}
	if r.err != nil || last != 0x0b {
		return errors.New("its code could not be read to its end")
	}
	return nil
}

func (r *wasmReader) blockType() {
	switch b := r.byte(); {
	case b == 0x40 || (b >= 0x7b && b <= 0x7f) || b == 0x70 || b == 0x6f:
	default:
		r.off--
		r.skipLEB() // a type index, as a signed 33-bit number
	}
}

// miscOp reads an instruction after the 0xfc prefix.
func (r *wasmReader) miscOp() error {
	switch op := r.u32(); {
	case op <= 7: // saturating truncations
	case op == 10: // memory.copy
		r.byte()
		r.byte()
	case op == 11: // memory.fill
		r.byte()
	case op == 16: // table.size
		r.u32()
	case op == 8 || op == 9:
		return errors.New("it uses memory.init or data.drop")
	case op >= 12 && op <= 17:
		return fmt.Errorf("it changes a table or an element segment (0xfc %d)", op)
	default:
		return fmt.Errorf("it uses the instruction 0xfc %d, which the check does not know", op)
	}
	return nil
}

// vectorOp reads a SIMD instruction after the 0xfd prefix: none changes
// a table.
func (r *wasmReader) vectorOp() {
	switch op := r.u32(); {
	case op <= 0x0b || op == 0x5c || op == 0x5d: // loads and stores
		r.u32()
		r.u32()
	case op == 0x0c || op == 0x0d: // v128.const, i8x16.shuffle
		r.bytes(16)
	case op >= 0x15 && op <= 0x22: // extract and replace lane
		r.byte()
	case op >= 0x54 && op <= 0x5b: // load and store lane
		r.u32()
		r.u32()
		r.byte()
	}
}
