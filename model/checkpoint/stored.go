package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/vdpp/vdpp/gguf"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

// Stored is one network's weights as they are stored: checked against the tensors the
// network expects and kept in the file's type (f32, f16, bf16 or f64 in safetensors; any
// of tensor/quant's types in GGUF), memory-mapped, until the network asks for them. Each
// converts them to float32 one tensor at a time and EachStored hands them over as stored,
// so a network never holds a float32 copy of the whole component besides its own: a bf16
// folder costs its file's bytes plus what the network keeps, not twice the float32 size.
//
// The weights may come from a diffusers folder (OpenDir, OpenFile, Checkpoint.OpenComponent)
// or from one file in another layout (OpenSingleFile: a GGUF or safetensors file whose
// names a KeyMap renames).
//
// A Stored holds its files open until Close; it is not safe for concurrent use.
type Stored struct {
	path     string // the weights file or shard index, for errors
	names    []string
	shapes   map[string][]int      // expected name -> shape
	files    map[string]source     // file key -> open file
	where    map[string]string     // name in the files -> file key
	infos    map[string]fileTensor // network name -> the tensor as stored
	progress Progress
}

// source is an open weights file: *safetensors.File or *gguf.File.
type source interface {
	Path() string
	Bytes(name string) ([]byte, error)
	Release(name string)
	Close() error
}

// fileTensor describes a tensor as its file stores it.
type fileTensor struct {
	file  string     // its name in the file
	shape []int      // its shape (PyTorch's order; a GGUF's original shape applied)
	typ   quant.Type // its type; F32 for an F64 tensor, which is rounded as it is read
	known bool       // typ is a type vdpp reads
	f64   bool
	label string // the type as the file spells it, for messages
	row   int    // the weights of one stored row: blocks never cross it
	size  int64  // stored bytes
}

// StoredTensor is a tensor as a file stores it, handed over by EachStored: its shape (the
// network's), its type, and its bytes in that type's layout (little-endian values
// row-major; for the block types, the rows along the last axis as consecutive blocks).
type StoredTensor struct {
	Shape []int
	Type  quant.Type
	Data  []byte
}

// OpenDir opens the weights of a transformers-style folder (see WeightsDirPath): one file,
// or the shards its index names. Every shard must exist and hold exactly the tensors the
// index assigns to it (ErrShardIndex); the tensors are checked against expected (name ->
// shape) apart from opts.Ignore, and any missing, unexpected, mis-shaped or non-float
// tensor is a *LoadError naming the weights file or index. No tensor data is read.
func OpenDir(dir, stem string, expected map[string][]int, opts LoadDirOptions) (*Stored, error) {
	path, sharded, err := WeightsDirPath(dir, stem)
	if err != nil {
		return nil, err
	}
	if !sharded {
		return OpenFile(path, expected, opts)
	}
	return openSharded(dir, path, expected, opts)
}

// OpenFile is OpenDir for one weights file given by its path.
func OpenFile(path string, expected map[string][]int, opts LoadDirOptions) (*Stored, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	base := filepath.Base(path)
	s := newStored(path, expected, opts)
	s.files[base] = f
	for _, n := range f.Names() {
		s.where[n] = base
	}
	return s.check(opts.LoadOptions, nil)
}

// openSharded opens the shards a shard index names and checks them against it.
func openSharded(dir, index string, expected map[string][]int, opts LoadDirOptions) (*Stored, error) {
	data, err := os.ReadFile(index)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrShardIndex, err)
	}
	idx, err := ParseShardIndex(index, data)
	if err != nil {
		return nil, err
	}
	s := newStored(index, expected, opts)
	shards := map[string]*safetensors.File{}
	for _, shard := range idx.Shards() {
		f, err := safetensors.Open(filepath.Join(dir, shard))
		if errors.Is(err, os.ErrNotExist) {
			s.Close()
			return nil, fmt.Errorf("%s: %w: shard %s is missing", index, ErrShardIndex, shard)
		}
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("%s: shard %s: %w", index, shard, err)
		}
		s.files[shard] = f
		shards[shard] = f
	}
	if err := checkShards(index, idx, shards); err != nil {
		s.Close()
		return nil, err
	}
	s.where = idx.WeightMap
	return s.check(opts.LoadOptions, nil)
}

// SingleFileOptions tunes OpenSingleFile.
type SingleFileOptions struct {
	LoadDirOptions
	// Keys renames the file's tensors onto the network's names (nil: the file uses them).
	Keys *KeyMap
}

// OpenSingleFile opens one weights file that replaces a folder's component, as
// stable-diffusion.cpp's --diffusion-model and diffusers' from_single_file read one: a
// GGUF file (any of tensor/quant's types; ComfyUI-GGUF's and stable-diffusion.cpp's
// conventions) or a safetensors file, its names renamed by opts.Keys. The tensors are
// checked against expected as OpenDir does; a problem names the tensor (with its name in
// the file when the two differ) and the file. No tensor data is read.
func OpenSingleFile(path string, expected map[string][]int, opts SingleFileOptions) (*Stored, error) {
	magic := make([]byte, 4)
	if f, err := os.Open(path); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWeights, err)
	} else {
		_, _ = f.Read(magic)
		f.Close()
	}
	var src source
	var names []string
	var err error
	isGGUF := string(magic) == gguf.Magic
	if isGGUF {
		var g *gguf.File
		if g, err = gguf.Open(path); err == nil {
			src, names = g, g.Names()
		}
	} else {
		var f *safetensors.File
		if f, err = safetensors.Open(path); err == nil {
			src, names = f, f.Names()
		}
	}
	if err != nil {
		return nil, err
	}
	s := newStored(path, expected, opts.LoadDirOptions)
	s.files[path] = src
	for _, n := range names {
		s.where[n] = path
	}
	return s.check(opts.LoadOptions, opts.Keys)
}

func newStored(path string, expected map[string][]int, opts LoadDirOptions) *Stored {
	return &Stored{path: path, names: sortedKeys(expected), shapes: expected,
		files: map[string]source{}, where: map[string]string{}, progress: opts.Progress}
}

// describe returns how a file stores tensor name.
func describe(src source, name string) (fileTensor, error) {
	switch f := src.(type) {
	case *safetensors.File:
		info, _ := f.Info(name)
		t := fileTensor{file: name, shape: info.Shape, label: string(info.DType), size: info.ByteLen(), row: 1}
		if len(info.Shape) > 0 {
			t.row = info.Shape[len(info.Shape)-1]
		}
		switch info.DType {
		case safetensors.F32:
			t.typ, t.known = quant.F32, true
		case safetensors.F16:
			t.typ, t.known = quant.F16, true
		case safetensors.BF16:
			t.typ, t.known = quant.BF16, true
		case safetensors.F64:
			t.typ, t.known, t.f64 = quant.F32, true, true
		}
		return t, nil
	case *gguf.File:
		info, _ := f.Info(name)
		shape, err := f.Shape(name)
		if err != nil {
			return fileTensor{}, err
		}
		t := fileTensor{file: name, shape: shape, typ: info.Type, known: info.Size >= 0, label: info.Type.String(), size: info.Size, row: 1}
		if len(info.Dims) > 0 {
			t.row = int(info.Dims[0])
		}
		return t, nil
	}
	return fileTensor{}, fmt.Errorf("checkpoint: unknown source %T", src)
}

// check gathers the tensor descriptions (renamed by keys) and compares them with the
// expected tensors; on a problem it closes the files.
func (s *Stored) check(opts LoadOptions, keys *KeyMap) (*Stored, error) {
	infos := make(map[string]fileTensor, len(s.where))
	var probs []Problem
	for _, file := range sortedKeys(s.where) {
		t, err := describe(s.files[s.where[file]], file)
		if err != nil {
			s.Close()
			return nil, err
		}
		name := keys.ToNetwork(file)
		if prev, dup := infos[name]; dup {
			probs = append(probs, Problem{Name: name, Kind: Duplicate, FileName: t.file, Other: prev.file})
			continue
		}
		infos[name] = t
	}
	s.infos = infos
	for _, p := range checkInfos(infos, s.shapes, opts) {
		if f := keys.ToFile(p.Name); p.Kind == Missing && f != p.Name {
			p.FileName = f // the name the file's layout would give it
		}
		probs = append(probs, p)
	}
	if len(probs) > 0 {
		sortProblems(probs)
		s.Close()
		return nil, &LoadError{Path: s.path, Problems: probs, Max: opts.MaxProblems, Layout: keys.layout()}
	}
	return s, nil
}

// Path returns the weights file or shard index the tensors come from.
func (s *Stored) Path() string { return s.path }

// Names returns the names of the expected tensors, sorted (the order Each uses).
func (s *Stored) Names() []string { return append([]string(nil), s.names...) }

// Type returns the stored type of tensor name (F32 for an F64 safetensors tensor, which is
// rounded as it is read); ok is false when it is not an expected tensor.
func (s *Stored) Type(name string) (t quant.Type, ok bool) {
	if _, ok := s.shapes[name]; !ok {
		return 0, false
	}
	return s.infos[name].typ, true
}

// StoredBytes returns the bytes of the expected tensors as stored (2 per element in bf16).
func (s *Stored) StoredBytes() int64 {
	var n int64
	for _, name := range s.names {
		n += s.infos[name].size
	}
	return n
}

// TypeBytes returns the bytes of the expected tensors as stored, by type (an F64 tensor
// counts as the F32 it is read as).
func (s *Stored) TypeBytes() map[quant.Type]int64 {
	out := map[quant.Type]int64{}
	for _, name := range s.names {
		t := s.infos[name]
		n := t.size
		if t.f64 {
			n /= 2
		}
		out[t.typ] += n
	}
	return out
}

// Float32Bytes returns the bytes the expected tensors take as float32 (4 per element):
// what a network holding them in float32 keeps.
func (s *Stored) Float32Bytes() int64 {
	var n int64
	for _, name := range s.names {
		n += 4 * int64(tensor.NumElements(s.shapes[name]))
	}
	return n
}

// Each converts the expected tensors to float32 one at a time, in name order, and hands
// each to add (the shape is the expected one). The tensor's data is one buffer reused
// from call to call: it is valid only until add returns, so add copies what it keeps (as
// nn.NewWeightsStream does). Progress, when set, is called after every tensor with the
// stored bytes read so far. An error of add stops Each and is returned.
func (s *Stored) Each(add func(name string, t *tensor.Dense) error) error {
	var scratch []float32
	return s.walk(func(name string, t fileTensor, b []byte) error {
		n := tensor.NumElements(s.shapes[name])
		if cap(scratch) < n {
			scratch = make([]float32, n)
		}
		data := scratch[:n]
		if err := toFloat32(t, b, data); err != nil {
			return fmt.Errorf("%s: %w", s.path, err)
		}
		return add(name, &tensor.Dense{Shape: append([]int(nil), s.shapes[name]...), Data: data})
	})
}

// EachStored hands the expected tensors to add one at a time, in name order, as stored:
// Data is a view of the file's mapping (valid only until add returns) in the stored type,
// with the network's shape. Two cases are converted on the way, so that a block type's
// rows always lie along the last axis of the shape: an F64 tensor is rounded to F32, and a
// block-quantized tensor the file wrote reshaped (its blocks crossing the network's rows,
// as ComfyUI-GGUF's convert writes some convolutions) is dequantized to F32.
func (s *Stored) EachStored(add func(name string, t StoredTensor) error) error {
	var scratch []byte
	return s.walk(func(name string, t fileTensor, b []byte) error {
		shape := s.shapes[name]
		typ := t.typ
		if t.f64 || (typ.Quantized() && (len(shape) == 0 || t.row != shape[len(shape)-1])) {
			n := tensor.NumElements(shape)
			f := make([]float32, n)
			if err := toFloat32(t, b, f); err != nil {
				return fmt.Errorf("%s: %w", s.path, err)
			}
			if cap(scratch) < 4*n {
				scratch = make([]byte, 4*n)
			}
			b, typ = scratch[:4*n], quant.F32
			for i, v := range f {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
			}
		}
		return add(name, StoredTensor{Shape: append([]int(nil), shape...), Type: typ, Data: b})
	})
}

// toFloat32 converts a stored tensor's bytes to float32.
func toFloat32(t fileTensor, b []byte, dst []float32) error {
	if t.f64 {
		if len(b) != 8*len(dst) {
			return fmt.Errorf("tensor %q: %d bytes for %d f64 values", t.file, len(b), len(dst))
		}
		for i := range dst {
			dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])))
		}
		return nil
	}
	if len(dst) == 0 {
		return nil
	}
	if err := quant.Dequantize(t.typ, b, dst); err != nil {
		return fmt.Errorf("tensor %q: %w", t.file, err)
	}
	return nil
}

// Tensors converts every expected tensor to float32 in fresh memory (what LoadDir returns).
func (s *Stored) Tensors() (map[string]*tensor.Dense, error) {
	out := make(map[string]*tensor.Dense, len(s.names))
	err := s.walk(func(name string, t fileTensor, b []byte) error {
		d := tensor.New(s.shapes[name]...)
		if err := toFloat32(t, b, d.Data); err != nil {
			return fmt.Errorf("%s: %w", s.path, err)
		}
		out[name] = d
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// walk reads the expected tensors' bytes one at a time, in name order, hands them to fn,
// then releases their pages and reports progress.
func (s *Stored) walk(fn func(name string, t fileTensor, b []byte) error) error {
	total := s.StoredBytes()
	var loaded int64
	for _, name := range s.names {
		t := s.infos[name]
		f := s.files[s.where[t.file]]
		if f == nil {
			return fmt.Errorf("%s: tensor %q: %w", s.path, t.file, safetensors.ErrClosed)
		}
		b, err := f.Bytes(t.file)
		if err != nil {
			return err // names the file and the tensor
		}
		err = fn(name, t, b)
		f.Release(t.file) // converted or copied: its stored pages need not stay resident
		if err != nil {
			return err
		}
		loaded += t.size
		if s.progress != nil {
			s.progress(loaded, total)
		}
	}
	return nil
}

// Close releases the files (their memory mappings). Closing twice is not an error.
func (s *Stored) Close() error {
	var errs []error
	names := make([]string, 0, len(s.files))
	for n := range s.files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := s.files[n].Close(); err != nil {
			errs = append(errs, err)
		}
	}
	s.files = map[string]source{}
	return errors.Join(errs...)
}
