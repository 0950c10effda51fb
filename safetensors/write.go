package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/vdpp/vdpp/tensor"

	"github.com/vdpp/vdpp/internal/atomicfile"
)

// NamedTensor is a float32 tensor to write under a name.
type NamedTensor struct {
	Name   string
	Tensor *tensor.Dense
}

// RawTensor is a tensor of any dtype given by its little-endian bytes.
type RawTensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// entry is one tensor to write: its header description and a function writing its bytes.
type entry struct {
	name   string
	dtype  DType
	shape  []int
	nbytes int64
	write  func(w io.Writer) error
}

// Write writes float32 tensors as F32, with optional metadata (nil or empty writes none).
func Write(w io.Writer, tensors []NamedTensor, metadata map[string]string) error {
	entries := make([]entry, len(tensors))
	for i, nt := range tensors {
		if nt.Tensor == nil {
			return fmt.Errorf("%w: tensor %q is nil", ErrInvalidTensor, nt.Name)
		}
		t := nt.Tensor
		if n, err := numElements(t.Shape); err != nil || n != int64(len(t.Data)) {
			return fmt.Errorf("%w: tensor %q: shape %v does not match %d elements", ErrInvalidTensor, nt.Name, t.Shape, len(t.Data))
		}
		entries[i] = entry{name: nt.Name, dtype: F32, shape: t.Shape, nbytes: 4 * int64(len(t.Data)),
			write: func(w io.Writer) error { return writeFloat32s(w, t.Data) }}
	}
	return writeEntries(w, entries, metadata)
}

// WriteRaw writes tensors of any known dtype from their raw little-endian bytes.
func WriteRaw(w io.Writer, tensors []RawTensor, metadata map[string]string) error {
	entries := make([]entry, len(tensors))
	for i, rt := range tensors {
		if !rt.DType.Valid() {
			return fmt.Errorf("%w: tensor %q: unknown dtype %q", ErrInvalidTensor, rt.Name, rt.DType)
		}
		n, err := numElements(rt.Shape)
		if err != nil || n*int64(rt.DType.Size()) != int64(len(rt.Data)) {
			return fmt.Errorf("%w: tensor %q: shape %v of %s does not match %d bytes", ErrInvalidTensor, rt.Name, rt.Shape, rt.DType, len(rt.Data))
		}
		data := rt.Data
		entries[i] = entry{name: rt.Name, dtype: rt.DType, shape: rt.Shape, nbytes: int64(len(data)),
			write: func(w io.Writer) error { _, err := w.Write(data); return err }}
	}
	return writeEntries(w, entries, metadata)
}

// WriteFile writes float32 tensors to path atomically (temporary file, then rename).
func WriteFile(path string, tensors []NamedTensor, metadata map[string]string) error {
	return writeFileAtomic(path, func(w io.Writer) error { return Write(w, tensors, metadata) })
}

// WriteMapFile writes the float32 tensors of a name -> tensor map to path atomically, in
// name order.
func WriteMapFile(path string, tensors map[string]*tensor.Dense, metadata map[string]string) error {
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	ts := make([]NamedTensor, len(names))
	for i, n := range names {
		ts[i] = NamedTensor{Name: n, Tensor: tensors[n]}
	}
	return WriteFile(path, ts, metadata)
}

// WriteRawFile writes raw tensors to path atomically (temporary file, then rename).
func WriteRawFile(path string, tensors []RawTensor, metadata map[string]string) error {
	return writeFileAtomic(path, func(w io.Writer) error { return WriteRaw(w, tensors, metadata) })
}

func numElements(shape []int) (int64, error) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 || (d != 0 && n > maxBytes/int64(d)) {
			return 0, fmt.Errorf("bad shape %v", shape)
		}
		n *= int64(d)
	}
	return n, nil
}

// writeEntries lays out the data (largest dtype first, then by name, so every tensor is
// aligned to its element size), writes the padded header and then the data.
func writeEntries(w io.Writer, entries []entry, metadata map[string]string) error {
	seen := map[string]bool{}
	for _, e := range entries {
		switch {
		case e.name == "":
			return fmt.Errorf("%w: empty tensor name", ErrInvalidTensor)
		case e.name == metadataKey:
			return fmt.Errorf("%w: %q is reserved", ErrInvalidTensor, metadataKey)
		case !utf8.ValidString(e.name):
			return fmt.Errorf("%w: tensor name %q is not valid UTF-8", ErrInvalidTensor, e.name)
		case seen[e.name]:
			return fmt.Errorf("%w: tensor %q given twice", ErrInvalidTensor, e.name)
		}
		seen[e.name] = true
	}
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("%w: metadata %q is not valid UTF-8", ErrInvalidTensor, k)
		}
	}
	order := append([]entry(nil), entries...)
	sort.SliceStable(order, func(i, j int) bool {
		if si, sj := order[i].dtype.Size(), order[j].dtype.Size(); si != sj {
			return si > sj
		}
		return order[i].name < order[j].name
	})
	offsets := map[string][2]int64{}
	pos := int64(0)
	for _, e := range order {
		offsets[e.name] = [2]int64{pos, pos + e.nbytes}
		pos += e.nbytes
	}
	header, err := encodeHeader(entries, offsets, metadata)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(header)))
	if _, err := bw.Write(lenBuf[:]); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	if _, err := bw.Write(header); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	for _, e := range order {
		if err := e.write(bw); err != nil {
			return fmt.Errorf("safetensors: write tensor %q: %w", e.name, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	return nil
}

// encodeHeader builds the JSON header: "__metadata__" first (when non-empty), then the
// tensors sorted by name, padded with spaces to a multiple of 8 bytes.
func encodeHeader(entries []entry, offsets map[string][2]int64, metadata map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	first := true
	sep := func() {
		if !first {
			buf.WriteByte(',')
		}
		first = false
	}
	if len(metadata) > 0 {
		sep()
		buf.WriteString(`"` + metadataKey + `":{`)
		for i, k := range sortedNames(metadata) {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJSONString(&buf, k)
			buf.WriteByte(':')
			writeJSONString(&buf, metadata[k])
		}
		buf.WriteByte('}')
	}
	byName := append([]entry(nil), entries...)
	sort.Slice(byName, func(i, j int) bool { return byName[i].name < byName[j].name })
	for _, e := range byName {
		sep()
		writeJSONString(&buf, e.name)
		buf.WriteString(`:{"dtype":`)
		writeJSONString(&buf, string(e.dtype))
		buf.WriteString(`,"shape":[`)
		for i, d := range e.shape {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.WriteString(strconv.Itoa(d))
		}
		off := offsets[e.name]
		fmt.Fprintf(&buf, `],"data_offsets":[%d,%d]}`, off[0], off[1])
	}
	buf.WriteByte('}')
	for buf.Len()%8 != 0 {
		buf.WriteByte(' ')
	}
	if buf.Len() > MaxHeaderSize {
		return nil, fmt.Errorf("%w: header of %d bytes exceeds the %d-byte limit", ErrInvalidTensor, buf.Len(), MaxHeaderSize)
	}
	return buf.Bytes(), nil
}

func writeJSONString(buf *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // marshalling a string cannot fail
	buf.Write(b)
}

// writeFloat32s writes little-endian float32s in chunks.
func writeFloat32s(w io.Writer, data []float32) error {
	var chunk [4096]byte
	for len(data) > 0 {
		n := min(len(data), len(chunk)/4)
		for i, v := range data[:n] {
			binary.LittleEndian.PutUint32(chunk[4*i:], math.Float32bits(v))
		}
		if _, err := w.Write(chunk[:4*n]); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// writeFileAtomic writes through fill into a temporary file next to path, syncs it and
// renames it over path; on any error the temporary file is removed.
func writeFileAtomic(path string, fill func(io.Writer) error) error {
	var fillErr error
	err := atomicfile.Write(path, atomicfile.Options{Sync: true}, func(w io.Writer) error {
		fillErr = fill(w)
		return fillErr
	})
	switch {
	case err == nil:
		return nil
	case err == fillErr:
		return fmt.Errorf("%s: %w", path, err)
	}
	return fmt.Errorf("%s: safetensors: %w", path, err)
}
