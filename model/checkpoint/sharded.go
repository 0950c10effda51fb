package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// ErrShardIndex: a sharded checkpoint's index (<stem>.safetensors.index.json) is malformed,
// names a shard that is missing, or disagrees with its shards.
var ErrShardIndex = errors.New("checkpoint: bad shard index")

// IndexSuffix is appended to a weights file name to name its shard index, as transformers
// and diffusers write them: "model.safetensors" -> "model.safetensors.index.json".
const IndexSuffix = ".index.json"

// ShardIndex is a parsed shard index: which shard file holds each tensor.
type ShardIndex struct {
	// WeightMap maps a tensor name to the shard file (a bare file name in the same folder).
	WeightMap map[string]string
	// TotalSize is metadata.total_size when present (bytes of all tensors), else 0.
	TotalSize int64
}

// ParseShardIndex parses a shard index, {"metadata": {...}, "weight_map": {name: file}};
// path names the file in errors. Every shard must be a bare "*.safetensors" file name
// (no folder part), and the weight map must not be empty.
func ParseShardIndex(path string, data []byte) (*ShardIndex, error) {
	var raw struct {
		Metadata  map[string]json.RawMessage `json:"metadata"`
		WeightMap map[string]string          `json:"weight_map"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrShardIndex, err)
	}
	if len(raw.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: %w: no \"weight_map\" entries", path, ErrShardIndex)
	}
	idx := &ShardIndex{WeightMap: make(map[string]string, len(raw.WeightMap))}
	for _, name := range sortedKeys(raw.WeightMap) {
		file := raw.WeightMap[name]
		if name == "" {
			return nil, fmt.Errorf("%s: %w: empty tensor name in \"weight_map\"", path, ErrShardIndex)
		}
		if !validShardName(file) {
			return nil, fmt.Errorf("%s: %w: tensor %q: shard %q is not a bare *.safetensors file name", path, ErrShardIndex, name, file)
		}
		idx.WeightMap[name] = file
	}
	if v, ok := raw.Metadata["total_size"]; ok && strings.TrimSpace(string(v)) != "null" {
		var n float64 // written as an integer, sometimes as a float
		if err := json.Unmarshal(v, &n); err != nil || n < 0 || n > 1<<62 {
			return nil, fmt.Errorf("%s: %w: metadata.total_size %s is not a byte count", path, ErrShardIndex, Abbrev(v))
		}
		idx.TotalSize = int64(n)
	}
	return idx, nil
}

// validShardName accepts a bare file name ending in .safetensors.
func validShardName(s string) bool {
	return strings.HasSuffix(s, ".safetensors") && len(s) > len(".safetensors") &&
		!strings.ContainsAny(s, `/\`+"\x00") && filepath.Base(s) == s && !strings.HasPrefix(s, ".")
}

// Shards returns the distinct shard file names, sorted.
func (x *ShardIndex) Shards() []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range x.WeightMap {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

// Progress is called while tensors load with the bytes read so far (as stored, before
// conversion to float32) and the total to read.
type Progress func(loaded, total int64)

// LoadDirOptions tunes LoadDir.
type LoadDirOptions struct {
	LoadOptions
	// Progress, when not nil, is called after every tensor.
	Progress Progress
}

// WeightsDirPath returns the weights of a transformers-style folder: dir/<stem>.safetensors
// when it exists, else dir/<stem>.safetensors.index.json (sharded). The error names both
// when neither exists.
func WeightsDirPath(dir, stem string) (path string, sharded bool, err error) {
	single := filepath.Join(dir, stem+".safetensors")
	if st, err := os.Stat(single); err == nil && st.Mode().IsRegular() {
		return single, false, nil
	}
	index := single + IndexSuffix
	if st, err := os.Stat(index); err == nil && st.Mode().IsRegular() {
		return index, true, nil
	}
	return "", false, fmt.Errorf("%s: %w: neither %s nor %s", dir, ErrWeights, filepath.Base(single), filepath.Base(index))
}

// LoadDir loads the weights of a transformers-style folder (see OpenDir, which checks
// them) and returns them converted to float32 in fresh memory. A network that copies its
// weights onto a backend should use OpenDir and Stored.Each instead, which never hold more
// than one float32 tensor.
func LoadDir(dir, stem string, expected map[string][]int, opts LoadDirOptions) (map[string]*tensor.Dense, error) {
	s, err := OpenDir(dir, stem, expected, opts)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Tensors()
}

// LoadDirEach is OpenDir and Stored.Each: each tensor is handed to each as soon as it is
// converted, in name order, in one buffer reused from call to call (valid only until each
// returns). Every check is made before the first call; an error from each stops the load
// and is returned.
func LoadDirEach(dir, stem string, expected map[string][]int, opts LoadDirOptions, each func(name string, t *tensor.Dense) error) error {
	s, err := OpenDir(dir, stem, expected, opts)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Each(each)
}

// checkShards checks that the shards hold exactly the tensors the index assigns to them.
func checkShards(path string, idx *ShardIndex, files map[string]*safetensors.File) error {
	for _, name := range sortedKeys(idx.WeightMap) {
		shard := idx.WeightMap[name]
		if _, ok := files[shard].Info(name); !ok {
			return fmt.Errorf("%s: %w: tensor %q is not in shard %s", path, ErrShardIndex, name, shard)
		}
	}
	for _, shard := range sortedKeys(files) {
		for _, name := range files[shard].Names() {
			if idx.WeightMap[name] != shard {
				return fmt.Errorf("%s: %w: shard %s holds tensor %q, which the index does not assign to it", path, ErrShardIndex, shard, name)
			}
		}
	}
	return nil
}

// checkInfos compares tensor descriptions (keyed by the network's names) gathered from
// any number of files with the expected tensors.
func checkInfos(infos map[string]fileTensor, expected map[string][]int, opts LoadOptions) []Problem {
	ignore := map[string]bool{}
	for _, n := range opts.Ignore {
		ignore[n] = true
	}
	var probs []Problem
	for name, want := range expected {
		info, ok := infos[name]
		p := Problem{Name: name, FileShape: info.shape, Expected: want, DType: safetensors.DType(info.label)}
		if info.file != name {
			p.FileName = info.file
		}
		switch {
		case !ok:
			p.Kind, p.FileShape = Missing, nil
		case !SameLayout(info.shape, want):
			p.Kind = ShapeMismatch
		case !info.known:
			p.Kind = BadDType
		default:
			continue
		}
		probs = append(probs, p)
	}
	for name, info := range infos {
		if _, ok := expected[name]; ok || ignore[name] || ignore[info.file] {
			continue
		}
		probs = append(probs, Problem{Name: info.file, Kind: Unexpected, FileShape: info.shape, DType: safetensors.DType(info.label)})
	}
	sortProblems(probs)
	return probs
}

// SameLayout reports whether a tensor stored with shape file holds the elements of a
// tensor of shape want in the same row-major order: the same shape up to leading
// dimensions of 1 (ggml counts a tensor's dimensions without its outer 1s, so
// stable-diffusion.cpp writes a [1, 6, 5120] modulation as [6, 5120]), or want with its two
// leading dimensions merged (stable-diffusion.cpp stores 5-dimensional convolution weights
// [out, in, t, h, w] as [out·in, t, h, w], ggml having 4 dimensions).
func SameLayout(file, want []int) bool {
	file, want = trimOnes(file), trimOnes(want)
	if slices.Equal(file, want) {
		return true
	}
	return len(want) == 5 && len(file) == 4 && file[0] == want[0]*want[1] && slices.Equal(file[1:], want[2:])
}

// trimOnes drops a shape's leading dimensions of 1 (keeping at least one dimension).
func trimOnes(s []int) []int {
	for len(s) > 1 && s[0] == 1 {
		s = s[1:]
	}
	return s
}

func sortProblems(probs []Problem) {
	sort.Slice(probs, func(i, j int) bool {
		if probs[i].Name != probs[j].Name {
			return probs[i].Name < probs[j].Name
		}
		return probs[i].Kind < probs[j].Kind
	})
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
