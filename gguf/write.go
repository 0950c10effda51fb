package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/vdpp/vdpp/internal/atomicfile"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

// Writer assembles a GGUF v3 file: metadata in the order set, then the tensor table and
// the tensors' data in the order added, each tensor's data aligned. The files it writes are
// what ggml's gguf writer and gguf-py's GGUFWriter write for the same content.
type Writer struct {
	// Alignment is the data alignment (DefaultAlignment when 0); a value other than 32 is
	// also written as general.alignment.
	Alignment int
	kvs       []KV
	keys      map[string]bool
	tensors   []wtensor
	names     map[string]bool
}

type wtensor struct {
	info TensorInfo
	data []byte
	fill func(dst []byte) error // AddFunc's: writes data at WriteTo
}

// NewWriter returns an empty Writer.
func NewWriter() *Writer { return &Writer{keys: map[string]bool{}, names: map[string]bool{}} }

// Set adds a metadata key (once).
func (w *Writer) Set(key string, v Value) error {
	if key == "" || w.keys[key] {
		return fmt.Errorf("%w: metadata key %q empty or set twice", ErrWrite, key)
	}
	if !v.typ.known() || (v.typ == TypeArray && !v.elem.known()) {
		return fmt.Errorf("%w: metadata %q of %v", ErrWrite, key, v.typ)
	}
	w.keys[key] = true
	w.kvs = append(w.kvs, KV{Key: key, Value: v})
	return nil
}

// Add adds a tensor of shape (PyTorch's order; written reversed as ggml's ne) in type t,
// with data already in that type's layout. A ggml type tensor/quant does not know is
// written as given, its size unchecked (for tests of readers).
func (w *Writer) Add(name string, t quant.Type, shape []int, data []byte) error {
	info, err := w.info(name, t, shape, int64(len(data)))
	if err != nil {
		return err
	}
	w.names[name] = true
	w.tensors = append(w.tensors, wtensor{info: info, data: data})
	return nil
}

// AddFunc adds a tensor of shape in type t whose data fill writes into a buffer of the
// tensor's size when the file is written: a writer of large files then holds one tensor's
// data at a time.
func (w *Writer) AddFunc(name string, t quant.Type, shape []int, fill func(dst []byte) error) error {
	row := 1
	if len(shape) > 0 {
		row = shape[len(shape)-1]
	}
	size, err := t.Bytes(tensor.NumElements(shape), max(row, 1))
	if err != nil {
		return fmt.Errorf("%w: tensor %q %v %v: %w", ErrWrite, name, t, shape, err)
	}
	info, err := w.info(name, t, shape, size)
	if err != nil {
		return err
	}
	w.names[name] = true
	w.tensors = append(w.tensors, wtensor{info: info, fill: fill})
	return nil
}

// info checks a tensor to add, of size bytes of data, and describes it.
func (w *Writer) info(name string, t quant.Type, shape []int, size int64) (TensorInfo, error) {
	if name == "" || w.names[name] {
		return TensorInfo{}, fmt.Errorf("%w: tensor %q empty or added twice", ErrWrite, name)
	}
	if len(shape) > MaxDims {
		return TensorInfo{}, fmt.Errorf("%w: tensor %q has %d dimensions", ErrWrite, name, len(shape))
	}
	dims := make([]int64, len(shape))
	for i, d := range shape {
		if d < 0 {
			return TensorInfo{}, fmt.Errorf("%w: tensor %q shape %v", ErrWrite, name, shape)
		}
		dims[len(shape)-1-i] = int64(d)
	}
	row := 1
	if len(shape) > 0 {
		row = shape[len(shape)-1]
	}
	want, err := t.Bytes(tensor.NumElements(shape), max(row, 1))
	if !t.Known() {
		want, err = size, nil
	}
	if err != nil || (row > 0 && want != size) || (row == 0 && size != 0) {
		return TensorInfo{}, fmt.Errorf("%w: tensor %q %v %v: %d bytes (%v)", ErrWrite, name, t, shape, size, err)
	}
	return TensorInfo{Name: name, Type: t, Dims: dims, Size: size}, nil
}

// AddFloat32 quantizes x (shape in PyTorch's order, rows along the last axis) to type t
// and adds it.
func (w *Writer) AddFloat32(name string, t quant.Type, shape []int, x []float32) error {
	if len(x) != tensor.NumElements(shape) {
		return fmt.Errorf("%w: tensor %q shape %v with %d values", ErrWrite, name, shape, len(x))
	}
	var data []byte
	if len(x) > 0 {
		row := shape[len(shape)-1]
		rb, err := t.RowBytes(row)
		if err != nil {
			return fmt.Errorf("%w: tensor %q: %w", ErrWrite, name, err)
		}
		data = make([]byte, len(x)/row*rb)
		for r := 0; r < len(x)/row; r++ {
			if err := quant.QuantizeTo(t, data[r*rb:(r+1)*rb], x[r*row:(r+1)*row]); err != nil {
				return fmt.Errorf("%w: tensor %q: %w", ErrWrite, name, err)
			}
		}
	}
	return w.Add(name, t, shape, data)
}

// WriteTo writes the file.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	align := int64(w.Alignment)
	if align == 0 {
		align = DefaultAlignment
	}
	if align < 0 || align&(align-1) != 0 {
		return 0, fmt.Errorf("%w: alignment %d", ErrWrite, align)
	}
	kvs := w.kvs
	if align != DefaultAlignment && !w.keys[AlignmentKey] {
		kvs = append(kvs[:len(kvs):len(kvs)], KV{AlignmentKey, Uint32(uint32(align))})
	}
	var h []byte
	h = append(h, Magic...)
	h = binary.LittleEndian.AppendUint32(h, 3)
	h = binary.LittleEndian.AppendUint64(h, uint64(len(w.tensors)))
	h = binary.LittleEndian.AppendUint64(h, uint64(len(kvs)))
	for _, kv := range kvs {
		h = binary.LittleEndian.AppendUint64(h, uint64(len(kv.Key)))
		h = append(h, kv.Key...)
		h = binary.LittleEndian.AppendUint32(h, uint32(kv.Value.typ))
		h = kv.Value.encode(h)
	}
	var off int64
	for _, t := range w.tensors {
		h = binary.LittleEndian.AppendUint64(h, uint64(len(t.info.Name)))
		h = append(h, t.info.Name...)
		h = binary.LittleEndian.AppendUint32(h, uint32(len(t.info.Dims)))
		for _, d := range t.info.Dims {
			h = binary.LittleEndian.AppendUint64(h, uint64(d))
		}
		h = binary.LittleEndian.AppendUint32(h, uint32(t.info.Type))
		h = binary.LittleEndian.AppendUint64(h, uint64(off))
		off = pad(off+t.info.Size, align)
	}
	bw := bufio.NewWriterSize(out, 1<<20)
	n := int64(0)
	write := func(b []byte) error {
		m, err := bw.Write(b)
		n += int64(m)
		return err
	}
	zeros := make([]byte, align)
	if err := write(h); err != nil {
		return n, err
	}
	if err := write(zeros[:pad(int64(len(h)), align)-int64(len(h))]); err != nil {
		return n, err
	}
	var buf []byte
	for _, t := range w.tensors {
		data := t.data
		if t.fill != nil {
			if int64(cap(buf)) < t.info.Size {
				buf = make([]byte, t.info.Size)
			}
			data = buf[:t.info.Size]
			if err := t.fill(data); err != nil {
				return n, fmt.Errorf("gguf: tensor %q: %w", t.info.Name, err)
			}
		}
		if err := write(data); err != nil {
			return n, err
		}
		if err := write(zeros[:pad(t.info.Size, align)-t.info.Size]); err != nil {
			return n, err
		}
	}
	return n, bw.Flush()
}

func pad(n, align int64) int64 { return (n + align - 1) / align * align }

// WriteFile writes the file at path atomically (a temporary file renamed into place).
func (w *Writer) WriteFile(path string) error {
	return atomicfile.Write(path, atomicfile.Options{}, func(out io.Writer) error {
		_, err := w.WriteTo(out)
		return err
	})
}
