package gguf

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/vdpp/vdpp/internal/mmapfile"
	"github.com/vdpp/vdpp/tensor/quant"
)

// Magic is the first four bytes of a GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the alignment of tensor data when general.alignment is absent.
const DefaultAlignment = 32

// AlignmentKey is the metadata key of the tensor data alignment.
const AlignmentKey = "general.alignment"

// OrigShapePrefix starts the metadata key under which ComfyUI-GGUF's convert stores a
// tensor's shape when it wrote the tensor reshaped (an array of int32, the PyTorch order).
const OrigShapePrefix = "comfy.gguf.orig_shape."

// MaxDims is the most dimensions a tensor may have (ggml has 4; ComfyUI-GGUF's tools write
// 5-dimensional convolution weights).
const MaxDims = 8

// KV is one metadata key and its value.
type KV struct {
	Key   string
	Value Value
}

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name string
	// Type is the tensor's ggml type; it may be one tensor/quant does not know (Size is
	// then -1).
	Type quant.Type
	// Dims are the tensor's dimensions as GGUF stores them (ggml's ne: the fastest-varying
	// first, the reverse of PyTorch's shape).
	Dims []int64
	// Offset is where the data starts, from the start of the data section.
	Offset int64
	// Size is the data's bytes (-1 for a type tensor/quant does not know).
	Size int64
}

// Elements returns the number of elements.
func (t TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Shape returns the dimensions in PyTorch's order (Dims reversed).
func (t TensorInfo) Shape() []int {
	out := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		out[len(t.Dims)-1-i] = int(d)
	}
	return out
}

// File is an open, validated GGUF file. It is safe for concurrent use.
type File struct {
	path      string
	version   uint32
	alignment int
	kvs       []KV
	keys      map[string]int
	tensors   []TensorInfo
	index     map[string]int
	dataStart int64

	mu     sync.RWMutex
	data   []byte // the data section; nil once closed
	closed bool
	unmap  func() error
	mapped []byte
}

// Open memory-maps (or, where the platform cannot, reads) the GGUF file at path and
// validates its header and tensor table before it returns.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	size := st.Size()
	buf, unmap, err := mmapfile.Map(f, size)
	if err != nil || size == 0 {
		if buf, err = io.ReadAll(io.NewSectionReader(f, 0, size)); err != nil {
			return nil, fmt.Errorf("%s: gguf: read: %w", path, err)
		}
		unmap = nil
	}
	file, err := parse(path, buf)
	if err != nil {
		if unmap != nil {
			unmap()
		}
		return nil, err
	}
	file.unmap = unmap
	if unmap != nil {
		file.mapped = buf
	}
	return file, nil
}

// OpenBytes validates an in-memory GGUF file; name is used in error messages. The File
// keeps a reference to buf, which must not change while the File is in use.
func OpenBytes(name string, buf []byte) (*File, error) { return parse(name, buf) }

// reader walks the header.
type reader struct {
	b   []byte
	pos int
}

func (r *reader) need(n int, what string) error {
	if n < 0 || len(r.b)-r.pos < n {
		return fmt.Errorf("%w: %s at byte %d", ErrTruncated, what, r.pos)
	}
	return nil
}

func (r *reader) u32(what string) (uint32, error) {
	if err := r.need(4, what); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint32(r.b[r.pos:])
	r.pos += 4
	return v, nil
}

func (r *reader) u64(what string) (uint64, error) {
	if err := r.need(8, what); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint64(r.b[r.pos:])
	r.pos += 8
	return v, nil
}

func (r *reader) str(what string) (string, error) {
	s, rest, err := readString(r.b[r.pos:])
	if err != nil {
		return "", fmt.Errorf("%s at byte %d: %w", what, r.pos, err)
	}
	r.pos = len(r.b) - len(rest)
	return string(s), nil
}

// parse validates buf as a GGUF file.
func parse(path string, buf []byte) (*File, error) {
	f, end, err := parseHeader(path, buf)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// The metadata values alias the bytes they were read from: read them again from a
	// copy of the header, so that they outlive the mapping.
	g, _, err := parseHeader(path, slices.Clone(buf[:end]))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.kvs = g.kvs
	start := (int64(end) + int64(f.alignment) - 1) / int64(f.alignment) * int64(f.alignment)
	if len(f.tensors) > 0 && start > int64(len(buf)) {
		return nil, fmt.Errorf("%s: %w: the data section starts at byte %d of %d", path, ErrTruncated, start, len(buf))
	}
	start = min(start, int64(len(buf)))
	f.dataStart = start
	f.data = buf[start:]
	if err := f.checkData(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// parseHeader reads the header (version, metadata, tensor table) and returns where it ends.
func parseHeader(path string, buf []byte) (*File, int, error) {
	if len(buf) < 4 || string(buf[:4]) != Magic {
		return nil, 0, fmt.Errorf("%w: no GGUF magic", ErrFormat)
	}
	r := &reader{b: buf, pos: 4}
	version, err := r.u32("the version")
	if err != nil {
		return nil, 0, err
	}
	switch {
	case version == 2 || version == 3:
	case version&0xffff == 0 && version>>16 != 0:
		return nil, 0, fmt.Errorf("%w: a big-endian file (version bytes %#08x); only little-endian GGUF is read", ErrFormat, version)
	default:
		return nil, 0, fmt.Errorf("%w: version %d (2 and 3 are read)", ErrFormat, version)
	}
	nTensors, err := r.u64("the tensor count")
	if err != nil {
		return nil, 0, err
	}
	nKV, err := r.u64("the metadata count")
	if err != nil {
		return nil, 0, err
	}
	f := &File{path: path, version: version, alignment: DefaultAlignment, keys: map[string]int{}, index: map[string]int{}}
	for i := uint64(0); i < nKV; i++ {
		key, err := r.str("a metadata key")
		if err != nil {
			return nil, 0, err
		}
		if _, dup := f.keys[key]; dup {
			return nil, 0, fmt.Errorf("%w: metadata key %q twice", ErrFormat, key)
		}
		t, err := r.u32("the type of " + key)
		if err != nil {
			return nil, 0, err
		}
		v, rest, err := decodeValue(ValueType(t), r.b[r.pos:], 0)
		if err != nil {
			return nil, 0, fmt.Errorf("metadata %q: %w", key, err)
		}
		r.pos = len(r.b) - len(rest)
		f.keys[key] = len(f.kvs)
		f.kvs = append(f.kvs, KV{Key: key, Value: v})
	}
	if i, ok := f.keys[AlignmentKey]; ok {
		v := f.kvs[i].Value
		a, _ := v.Int()
		if v.Type() != TypeUint32 || a == 0 || a&(a-1) != 0 {
			return nil, 0, fmt.Errorf("%w: %s is %v %v, not a power of two as uint32", ErrFormat, AlignmentKey, v.Type(), v)
		}
		f.alignment = int(a)
	}
	for i := uint64(0); i < nTensors; i++ {
		t, err := readTensorInfo(r)
		if err != nil {
			return nil, 0, err
		}
		if _, dup := f.index[t.Name]; dup {
			return nil, 0, fmt.Errorf("%w: tensor %q twice", ErrFormat, t.Name)
		}
		f.index[t.Name] = len(f.tensors)
		f.tensors = append(f.tensors, t)
	}
	return f, r.pos, nil
}

func readTensorInfo(r *reader) (TensorInfo, error) {
	name, err := r.str("a tensor name")
	if err != nil {
		return TensorInfo{}, err
	}
	fail := func(err error) (TensorInfo, error) { return TensorInfo{}, fmt.Errorf("tensor %q: %w", name, err) }
	nd, err := r.u32("the dimension count")
	if err != nil {
		return fail(err)
	}
	if nd > MaxDims {
		return fail(fmt.Errorf("%w: %d dimensions (at most %d)", ErrFormat, nd, MaxDims))
	}
	t := TensorInfo{Name: name, Dims: make([]int64, nd)}
	n := int64(1)
	for i := range t.Dims {
		d, err := r.u64("a dimension")
		if err != nil {
			return fail(err)
		}
		if d > 1<<40 || (d > 0 && n > (1<<62)/int64(d)) {
			return fail(fmt.Errorf("%w: dimension %d is %d (too large)", ErrFormat, i, d))
		}
		t.Dims[i] = int64(d)
		n *= int64(d)
	}
	typ, err := r.u32("the type")
	if err != nil {
		return fail(err)
	}
	t.Type = quant.Type(typ)
	off, err := r.u64("the offset")
	if err != nil {
		return fail(err)
	}
	if off > math.MaxInt64/2 {
		return fail(fmt.Errorf("%w: offset %d", ErrOffsets, off))
	}
	t.Offset = int64(off)
	t.Size = -1
	if t.Type.Known() {
		row := int64(1)
		if nd > 0 {
			row = t.Dims[0]
		}
		if row > 0 && int(row)%t.Type.BlockSize() != 0 {
			return fail(fmt.Errorf("%w: rows of %d are not whole %v blocks of %d", ErrType, row, t.Type, t.Type.BlockSize()))
		}
		t.Size = n / int64(t.Type.BlockSize()) * int64(t.Type.BlockBytes())
	}
	return t, nil
}

// checkData checks that every tensor of a known type lies inside the data section, aligned,
// and that no two share bytes.
func (f *File) checkData() error {
	type span struct {
		lo, hi int64
		name   string
	}
	var spans []span
	for _, t := range f.tensors {
		if t.Offset%int64(f.alignment) != 0 {
			return fmt.Errorf("tensor %q: %w: offset %d is not a multiple of the alignment %d", t.Name, ErrOffsets, t.Offset, f.alignment)
		}
		if t.Size < 0 {
			continue
		}
		if t.Offset+t.Size > int64(len(f.data)) {
			return fmt.Errorf("tensor %q: %w: bytes [%d, %d) of a data section of %d", t.Name, ErrTruncated, t.Offset, t.Offset+t.Size, len(f.data))
		}
		if t.Size > 0 {
			spans = append(spans, span{t.Offset, t.Offset + t.Size, t.Name})
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	for i := 1; i < len(spans); i++ {
		if spans[i].lo < spans[i-1].hi {
			return fmt.Errorf("%w: tensors %q and %q share bytes", ErrOffsets, spans[i-1].name, spans[i].name)
		}
	}
	return nil
}

// Path returns the path (or name) the file was opened with.
func (f *File) Path() string { return f.path }

// Version returns the GGUF version (2 or 3).
func (f *File) Version() uint32 { return f.version }

// Alignment returns the alignment of tensor data (general.alignment, or 32).
func (f *File) Alignment() int { return f.alignment }

// DataOffset returns where the data section starts in the file.
func (f *File) DataOffset() int64 { return f.dataStart }

// Metadata returns the metadata, in file order.
func (f *File) Metadata() []KV { return slices.Clone(f.kvs) }

// Get returns the value of a metadata key.
func (f *File) Get(key string) (Value, bool) {
	i, ok := f.keys[key]
	if !ok {
		return Value{}, false
	}
	return f.kvs[i].Value, true
}

// Architecture returns general.architecture ("" when absent or not a string).
func (f *File) Architecture() string {
	v, _ := f.Get("general.architecture")
	s, _ := v.Text()
	return s
}

// Tensors returns the tensor descriptions, in file order.
func (f *File) Tensors() []TensorInfo {
	out := slices.Clone(f.tensors)
	for i := range out {
		out[i].Dims = slices.Clone(out[i].Dims)
	}
	return out
}

// Names returns the tensor names, in file order.
func (f *File) Names() []string {
	out := make([]string, len(f.tensors))
	for i, t := range f.tensors {
		out[i] = t.Name
	}
	return out
}

// Info returns the description of tensor name.
func (f *File) Info(name string) (TensorInfo, bool) {
	i, ok := f.index[name]
	if !ok {
		return TensorInfo{}, false
	}
	t := f.tensors[i]
	t.Dims = slices.Clone(t.Dims)
	return t, true
}

// Shape returns tensor name's shape in PyTorch's order: the original shape ComfyUI-GGUF
// recorded under OrigShapePrefix+name when there is one (the tensor was written reshaped,
// its data row-major in either shape), else its Dims reversed. An original shape that is
// not an array of integers or does not hold the tensor's element count is ErrFormat.
func (f *File) Shape(name string) ([]int, error) {
	i, ok := f.index[name]
	if !ok {
		return nil, fmt.Errorf("%s: %w: tensor %q", f.path, ErrNotFound, name)
	}
	t := f.tensors[i]
	v, ok := f.Get(OrigShapePrefix + name)
	if !ok {
		return t.Shape(), nil
	}
	dims, ok := v.Ints()
	n := int64(1)
	for _, d := range dims {
		if d < 0 || (d > 0 && n > math.MaxInt64/d) {
			ok = false
			break
		}
		n *= d
	}
	if !ok || len(dims) > MaxDims || n != t.Elements() {
		return nil, fmt.Errorf("%s: tensor %q: %w: %s%s is %v, not the shape of %d elements", f.path, name, ErrFormat, OrigShapePrefix, name, v, t.Elements())
	}
	out := make([]int, len(dims))
	for i, d := range dims {
		out[i] = int(d)
	}
	return out, nil
}

// lookup returns a tensor's description and bytes; the caller holds f.mu.RLock.
func (f *File) lookup(name string) (TensorInfo, []byte, error) {
	if f.closed {
		return TensorInfo{}, nil, fmt.Errorf("%s: tensor %q: %w", f.path, name, ErrClosed)
	}
	i, ok := f.index[name]
	if !ok {
		return TensorInfo{}, nil, fmt.Errorf("%s: %w: tensor %q", f.path, ErrNotFound, name)
	}
	t := f.tensors[i]
	if t.Size < 0 {
		return t, nil, fmt.Errorf("%s: tensor %q: %w: %v (one of %s)", f.path, name, ErrType, t.Type, strings.Join(quant.Flags(), ", "))
	}
	return t, f.data[t.Offset : t.Offset+t.Size : t.Offset+t.Size], nil
}

// Bytes returns tensor name's data as stored: a zero-copy view of the mapping that must
// not be modified and is invalid after Close. A tensor of a type tensor/quant does not
// know is ErrType.
func (f *File) Bytes(name string) ([]byte, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, b, err := f.lookup(name)
	return b, err
}

// Float32 returns tensor name's elements dequantized to float32 in fresh memory (bit for
// bit what ggml's dequantize_row_* gives).
func (f *File) Float32(name string) ([]float32, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, b, err := f.lookup(name)
	if err != nil {
		return nil, err
	}
	out := make([]float32, t.Elements())
	if err := quant.Dequantize(t.Type, b, out); err != nil {
		return nil, fmt.Errorf("%s: tensor %q: %w", f.path, name, err)
	}
	return out, nil
}

// Release says tensor name's bytes will not be read again soon: on Linux the mapped pages
// that hold them leave the process's resident memory (see safetensors.File.Release).
func (f *File) Release(name string) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.mapped == nil {
		return
	}
	if _, b, err := f.lookup(name); err == nil {
		mmapfile.DropPages(f.mapped, b)
	}
}

// Close releases the mapping; tensor data is unavailable afterwards (the metadata and the
// tensor table stay readable). Closing twice is not an error.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	f.data = nil
	f.mapped = nil
	if f.unmap != nil {
		err := f.unmap()
		f.unmap = nil
		if err != nil {
			return fmt.Errorf("%s: gguf: unmap: %w", f.path, err)
		}
	}
	return nil
}
