package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// Stored is one component's weights as they are stored: checked against the tensors a
// network expects and kept in the file's dtype (fp32, fp16, bf16 or fp64), memory-mapped
// by safetensors.Open, until the network asks for them. Each converts them to float32 one
// tensor at a time, so a network copying them onto a backend (nn.NewWeightsStream) never
// holds a float32 copy of the whole component besides the backend's: a bf16 folder costs
// its file's bytes plus what the backend keeps, not twice the float32 size on top.
//
// A Stored holds its files open until Close; it is not safe for concurrent use.
type Stored struct {
	path     string // the weights file or shard index, for errors
	names    []string
	shapes   map[string][]int                  // expected name -> shape
	files    map[string]*safetensors.File      // file name -> open file
	where    map[string]string                 // tensor -> file name
	infos    map[string]safetensors.TensorInfo // tensor -> its description in its file
	progress Progress
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
	return s.check(opts.LoadOptions)
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
	}
	if err := checkShards(index, idx, s.files); err != nil {
		s.Close()
		return nil, err
	}
	s.where = idx.WeightMap
	return s.check(opts.LoadOptions)
}

func newStored(path string, expected map[string][]int, opts LoadDirOptions) *Stored {
	return &Stored{path: path, names: sortedKeys(expected), shapes: expected,
		files: map[string]*safetensors.File{}, where: map[string]string{}, progress: opts.Progress}
}

// check gathers the tensor descriptions and compares them with the expected tensors; on
// a problem it closes the files.
func (s *Stored) check(opts LoadOptions) (*Stored, error) {
	s.infos = make(map[string]safetensors.TensorInfo, len(s.where))
	for name, file := range s.where {
		s.infos[name], _ = s.files[file].Info(name)
	}
	if probs := checkInfos(s.infos, s.shapes, opts); len(probs) > 0 {
		s.Close()
		return nil, &LoadError{Path: s.path, Problems: probs, Max: opts.MaxProblems}
	}
	return s, nil
}

// Path returns the weights file or shard index the tensors come from.
func (s *Stored) Path() string { return s.path }

// Names returns the names of the expected tensors, sorted (the order Each uses).
func (s *Stored) Names() []string { return append([]string(nil), s.names...) }

// DType returns the stored dtype of tensor name ("" when it is not an expected tensor).
func (s *Stored) DType(name string) safetensors.DType {
	if _, ok := s.shapes[name]; !ok {
		return ""
	}
	return s.infos[name].DType
}

// StoredBytes returns the bytes of the expected tensors as stored (2 per element in bf16).
func (s *Stored) StoredBytes() int64 {
	var n int64
	for _, name := range s.names {
		n += s.infos[name].ByteLen()
	}
	return n
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
	return s.each(true, add)
}

// Tensors converts every expected tensor to float32 in fresh memory (what LoadDir returns).
func (s *Stored) Tensors() (map[string]*tensor.Dense, error) {
	out := make(map[string]*tensor.Dense, len(s.names))
	err := s.each(false, func(name string, t *tensor.Dense) error {
		out[name] = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// each is Each (reuse: one buffer for every tensor) and Tensors (fresh memory each).
func (s *Stored) each(reuse bool, add func(name string, t *tensor.Dense) error) error {
	total := s.StoredBytes()
	var loaded int64
	var scratch []float32
	for _, name := range s.names {
		f := s.files[s.where[name]]
		if f == nil {
			return fmt.Errorf("%s: tensor %q: %w", s.path, name, safetensors.ErrClosed)
		}
		info := s.infos[name]
		b, err := f.Bytes(name)
		var data []float32
		if err == nil {
			if reuse {
				scratch, err = safetensors.ToFloat32Into(scratch, info.DType, b)
				data = scratch
			} else {
				data, err = safetensors.ToFloat32(info.DType, b)
			}
		}
		if err != nil {
			return fmt.Errorf("%s: tensor %q: %w", f.Path(), name, err)
		}
		err = add(name, &tensor.Dense{Shape: append([]int(nil), s.shapes[name]...), Data: data})
		f.Release(name) // converted: its stored pages need not stay resident
		if err != nil {
			return err
		}
		loaded += info.ByteLen()
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
	s.files = map[string]*safetensors.File{}
	return errors.Join(errs...)
}
