package unet

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/vdpp/vdpp/internal/goldentest"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// The shared golden-data helpers (internal/goldentest), under this package's test names.
var (
	backend       = goldentest.Backend
	devCheckpoint = goldentest.Checkpoint
)

// devModels caches the dev UNet per variant: loading and compiling are the slow part.
var devModels sync.Map // variant -> *Model

func devModel(t testing.TB, variant string) *Model {
	t.Helper()
	if m, ok := devModels.Load(variant); ok {
		return m.(*Model)
	}
	m, err := Load(devCheckpoint(t), variant, backend(t))
	if err != nil {
		t.Fatalf("Load(dev, %q): %v", variant, err)
	}
	devModels.Store(variant, m)
	return m
}

// readCase returns the named tensors of a golden case file ("inputs" or "outputs").
func readCase(t testing.TB, ck *checkpoint.Checkpoint, cas, file string) map[string]*tensor.Dense {
	t.Helper()
	f, err := safetensors.Open(filepath.Join(ck.Dir, "cases", cas, file+".safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]*tensor.Dense{}
	for _, n := range f.Names() {
		if out[n], err = f.Tensor(n); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// parseConfig parses a UNet config JSON or fails the test.
func parseConfig(t testing.TB, js string) Config {
	t.Helper()
	cfg, err := ParseConfig("test-config.json", []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// randomWeights returns deterministic weights for every expected tensor: GroupNorm /
// LayerNorm scales near 1, mix factors N(0, 1), everything else 0.05·N(0, 1) scaled down
// by the fan-in of Linear and conv weights.
func randomWeights(t testing.TB, cfg Config, seed uint64) map[string]*tensor.Dense {
	t.Helper()
	exp, err := ExpectedTensors(cfg)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(exp))
	for n := range exp {
		names = append(names, n)
	}
	sort.Strings(names)
	r := rand.New(rand.NewPCG(seed, 1))
	out := make(map[string]*tensor.Dense, len(exp))
	for _, n := range names {
		shape := exp[n]
		d := tensor.New(shape...)
		scale, offset := 0.05, 0.0
		switch {
		case strings.HasSuffix(n, "mix_factor"):
			scale = 1
		case strings.Contains(n, "norm") && strings.HasSuffix(n, ".weight") && len(shape) == 1:
			offset = 1
		case len(shape) >= 2:
			fan := tensor.NumElements(shape[1:])
			scale = 1 / math.Sqrt(float64(fan))
		}
		for i := range d.Data {
			d.Data[i] = float32(offset + scale*r.NormFloat64())
		}
		out[n] = d
	}
	return out
}

// randomTensor returns a tensor of N(0, 1) values.
func randomTensor(seed uint64, shape ...int) *tensor.Dense {
	r := rand.New(rand.NewPCG(seed, 2))
	d := tensor.New(shape...)
	for i := range d.Data {
		d.Data[i] = float32(r.NormFloat64())
	}
	return d
}

// fileShapes returns name -> shape of every tensor in a safetensors file.
func fileShapes(t testing.TB, path string) map[string][]int {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]int{}
	for _, n := range f.Names() {
		info, _ := f.Info(n)
		out[n] = info.Shape
	}
	return out
}

// withShapes returns weights with the names and shapes of shapes: tensors of base keep
// their data when the shape is unchanged; others are zero-filled.
func withShapes(base map[string]*tensor.Dense, shapes map[string][]int) map[string]*tensor.Dense {
	out := make(map[string]*tensor.Dense, len(shapes))
	for n, s := range shapes {
		if b, ok := base[n]; ok && tensor.NumElements(b.Shape) == tensor.NumElements(s) && len(b.Shape) == len(s) {
			same := true
			for i := range s {
				same = same && s[i] == b.Shape[i]
			}
			if same {
				out[n] = b
				continue
			}
		}
		out[n] = tensor.New(s...)
	}
	return out
}

// replaceOnce replaces the single occurrence of old in s, failing when there is none.
func replaceOnce(t testing.TB, s, old, repl string) string {
	t.Helper()
	if strings.Count(s, old) != 1 {
		t.Fatalf("%q occurs %d times", old, strings.Count(s, old))
	}
	return strings.Replace(s, old, repl, 1)
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// Small configs for tests that need random weights.
const (
	// smallConfig2: two levels, one layer per block, non-square friendly.
	smallConfig2 = `{
  "addition_time_embed_dim": 8, "projection_class_embeddings_input_dim": 24,
  "block_out_channels": [32, 64], "cross_attention_dim": 16,
  "down_block_types": ["CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"],
  "up_block_types": ["UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"],
  "in_channels": 8, "out_channels": 4, "layers_per_block": 1,
  "num_attention_heads": [2, 4], "num_frames": 3, "transformer_layers_per_block": 1
}`
	// smallConfig3: three levels, a single head count, per-level transformer depths, a
	// different channel count on each side.
	smallConfig3 = `{
  "addition_time_embed_dim": 4, "projection_class_embeddings_input_dim": 12,
  "block_out_channels": [32, 32, 64], "cross_attention_dim": 8,
  "down_block_types": ["CrossAttnDownBlockSpatioTemporal", "CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"],
  "up_block_types": ["UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"],
  "in_channels": 6, "out_channels": 3, "layers_per_block": [1, 2, 1],
  "num_attention_heads": 2, "num_frames": 14, "transformer_layers_per_block": [1, 2, 1]
}`
)
