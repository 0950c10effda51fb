package safetensors

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"unsafe"

	"github.com/vdpp/vdpp/internal/mmapfile"

	"github.com/vdpp/vdpp/tensor"
)

// File is an open, validated safetensors file. It is safe for concurrent use; Close waits
// for conversions in progress.
type File struct {
	path   string
	header Header
	index  map[string]int // name -> position in header.Tensors

	mu     sync.RWMutex
	data   []byte // the data buffer (after the header); nil once closed
	closed bool
	unmap  func() error // releases the mapping; nil when the file was read into memory
	mapped []byte       // the whole mapping (nil when read into memory), for Release
}

// Opener opens safetensors files. Map is the memory-mapping function (the platform's mmap
// by default); tests swap it to exercise the read fallback. The zero Opener is usable.
type Opener struct {
	// Map maps the first size bytes of f read-only and returns the bytes and a function
	// that unmaps them. When it is nil or fails, Open reads the file into memory instead.
	Map func(f *os.File, size int64) ([]byte, func() error, error)
}

// DefaultOpener memory-maps files where the platform allows it.
var DefaultOpener = Opener{Map: mmapfile.Map}

// Open opens and validates the safetensors file at path with DefaultOpener.
func Open(path string) (*File, error) { return DefaultOpener.Open(path) }

// Open opens and validates the safetensors file at path. The whole header is checked
// before it returns (see the package documentation for the rules).
func (o Opener) Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	size := st.Size()
	if size < 8 {
		return nil, fmt.Errorf("%s: %w: %d bytes, shorter than the 8-byte header length", path, ErrTruncated, size)
	}
	var buf []byte
	var unmap func() error
	if o.Map != nil {
		buf, unmap, err = o.Map(f, size)
	}
	if o.Map == nil || err != nil {
		buf, err = io.ReadAll(io.NewSectionReader(f, 0, size))
		if err != nil {
			return nil, fmt.Errorf("%s: safetensors: read: %w", path, err)
		}
		unmap = nil
	}
	file, err := newFile(path, buf)
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

// OpenBytes validates an in-memory safetensors file; name is used in error messages. The
// File keeps a reference to buf, which must not change while the File is in use.
func OpenBytes(name string, buf []byte) (*File, error) { return newFile(name, buf) }

// newFile splits buf into header and data buffer and validates the header.
func newFile(path string, buf []byte) (*File, error) {
	if len(buf) < 8 {
		return nil, fmt.Errorf("%s: %w: %d bytes, shorter than the 8-byte header length", path, ErrTruncated, len(buf))
	}
	n := binary.LittleEndian.Uint64(buf[:8])
	avail := uint64(len(buf) - 8)
	switch {
	case n < 2:
		return nil, fmt.Errorf("%s: %w: header length %d is below the minimum of 2 ('{}')", path, ErrInvalidHeader, n)
	case n > MaxHeaderSize:
		return nil, fmt.Errorf("%s: %w: header length %d exceeds the %d-byte limit", path, ErrInvalidHeader, n, MaxHeaderSize)
	case n > avail:
		return nil, fmt.Errorf("%s: %w: header length %d but only %d bytes follow", path, ErrTruncated, n, avail)
	}
	data := buf[8+n:]
	h, err := ParseHeader(buf[8:8+n], int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	index := make(map[string]int, len(h.Tensors))
	for i, t := range h.Tensors {
		index[t.Name] = i
	}
	return &File{path: path, header: h, index: index, data: data}, nil
}

// Path returns the path (or name) the file was opened with.
func (f *File) Path() string { return f.path }

// Header returns the validated header (tensors sorted by name). Callers must not modify it.
func (f *File) Header() Header { return f.header }

// Names returns the tensor names, sorted.
func (f *File) Names() []string {
	out := make([]string, len(f.header.Tensors))
	for i, t := range f.header.Tensors {
		out[i] = t.Name
	}
	return out
}

// Len returns the number of tensors.
func (f *File) Len() int { return len(f.header.Tensors) }

// Info returns the description of tensor name.
func (f *File) Info(name string) (TensorInfo, bool) {
	i, ok := f.index[name]
	if !ok {
		return TensorInfo{}, false
	}
	t := f.header.Tensors[i]
	t.Shape = append([]int(nil), t.Shape...)
	return t, true
}

// Metadata returns a copy of the "__metadata__" map (nil when the file has none).
func (f *File) Metadata() map[string]string {
	if f.header.Metadata == nil {
		return nil
	}
	out := make(map[string]string, len(f.header.Metadata))
	for k, v := range f.header.Metadata {
		out[k] = v
	}
	return out
}

// lookup finds a tensor and returns its info and bytes; the caller holds f.mu.RLock.
func (f *File) lookup(name string) (TensorInfo, []byte, error) {
	if f.closed {
		return TensorInfo{}, nil, fmt.Errorf("%s: tensor %q: %w", f.path, name, ErrClosed)
	}
	i, ok := f.index[name]
	if !ok {
		return TensorInfo{}, nil, fmt.Errorf("%s: %w: %q", f.path, ErrNotFound, name)
	}
	t := f.header.Tensors[i]
	return t, f.data[t.Offsets[0]:t.Offsets[1]:t.Offsets[1]], nil
}

// Bytes returns the raw little-endian bytes of tensor name: a zero-copy view into the
// mapping that must not be modified and is invalid after Close.
func (f *File) Bytes(name string) ([]byte, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, b, err := f.lookup(name)
	return b, err
}

// Release says tensor name's bytes will not be read again soon: on Linux the pages of the
// mapping that hold them leave the process's resident memory (madvise MADV_DONTNEED; the
// file is mapped read-only and shared, so a later read faults them in again from the file).
// A loader converting a large file tensor by tensor calls it after each one, so the
// file's pages do not accumulate in its RSS. It does nothing for a file read into memory,
// an unknown name or a closed file.
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

// Float32 returns the elements of tensor name converted to float32 in fresh memory. F32
// is copied, F16 and BF16 are converted exactly, F64 is rounded to nearest. Other dtypes
// give ErrDtype.
func (f *File) Float32(name string) ([]float32, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, b, err := f.lookup(name)
	if err != nil {
		return nil, err
	}
	out, err := ToFloat32(t.DType, b)
	if err != nil {
		return nil, fmt.Errorf("%s: tensor %q: %w", f.path, name, err)
	}
	return out, nil
}

// Tensor returns tensor name as a float32 tensor.Dense in fresh memory (see Float32).
func (f *File) Tensor(name string) (*tensor.Dense, error) {
	data, err := f.Float32(name)
	if err != nil {
		return nil, err
	}
	info, _ := f.Info(name)
	return &tensor.Dense{Shape: info.Shape, Data: data}, nil
}

// Close releases the mapping. Slices returned by Bytes must not be used afterwards; later
// data accesses return ErrClosed. Closing twice is not an error.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	f.data, f.mapped = nil, nil
	if f.unmap != nil {
		u := f.unmap
		f.unmap = nil
		if err := u(); err != nil {
			return fmt.Errorf("%s: safetensors: munmap: %w", f.path, err)
		}
	}
	return nil
}

// ToFloat32 converts little-endian elements of dtype dt to float32 in fresh memory. len(b)
// must be a multiple of the element size.
func ToFloat32(dt DType, b []byte) ([]float32, error) { return ToFloat32Into(nil, dt, b) }

// ToFloat32Into is ToFloat32 writing into dst's memory when its capacity suffices (fresh
// memory otherwise) and returning the converted elements, so that a loader converting many
// tensors can reuse one buffer.
func ToFloat32Into(dst []float32, dt DType, b []byte) ([]float32, error) {
	if !dt.IsFloat() {
		return nil, fmt.Errorf("%w: %q does not convert to float32", ErrDtype, dt)
	}
	size := dt.Size()
	if len(b)%size != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a whole number of %s elements", ErrShape, len(b), dt)
	}
	n := len(b) / size
	if cap(dst) < n {
		dst = make([]float32, n)
	}
	out := dst[:n]
	switch dt {
	case F32:
		if nativeLittleEndian && len(out) > 0 {
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(b)), b)
		} else {
			for i := range out {
				out[i] = float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			}
		}
	case F16:
		lut := halfLUT()
		for i := range out {
			out[i] = lut[binary.LittleEndian.Uint16(b[2*i:])]
		}
	case BF16:
		for i := range out {
			out[i] = BFloat16ToFloat32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case F64:
		for i := range out {
			out[i] = float32(float64frombits(binary.LittleEndian.Uint64(b[8*i:])))
		}
	}
	return out, nil
}

var nativeLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// sortedNames is a small helper for deterministic iteration over a map's keys.
func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
