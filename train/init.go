package train

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/vdpp/vdpp/tensor"
)

// InitWeights returns PyTorch-style initial values for the tensors of a network (name ->
// shape), deterministic in seed and each tensor's name: convolution and linear weights
// U(±1/√fan_in) (kaiming_uniform with a = √5, torch's default), biases 0, normalisation
// scales 1, embeddings N(0, 0.02²), and the spatio-temporal mix factors at the values
// diffusers constructs them with (mixUNet for the UNet's AlphaBlender, 0.5; 0 for the VAE
// decoder's).
func InitWeights(shapes map[string][]int, seed uint64, mixFactor float32) map[string]*tensor.Dense {
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make(map[string]*tensor.Dense, len(names))
	for _, name := range names {
		shape := shapes[name]
		t := tensor.New(shape...)
		h := fnv.New64a()
		h.Write([]byte(name))
		r := rand.New(rand.NewPCG(seed, h.Sum64()))
		base := name[strings.LastIndex(name, ".")+1:]
		switch {
		case strings.HasSuffix(name, "mix_factor"):
			for i := range t.Data {
				t.Data[i] = mixFactor
			}
		case base == "bias":
		case len(shape) == 1 && strings.Contains(name, "norm"): // LayerNorm / GroupNorm scale
			for i := range t.Data {
				t.Data[i] = 1
			}
		case strings.Contains(name, "embedding") && !strings.Contains(name, "linear"):
			for i := range t.Data {
				t.Data[i] = float32(0.02 * r.NormFloat64())
			}
		case len(shape) >= 2:
			fanIn := 1
			for _, d := range shape[1:] {
				fanIn *= d
			}
			bound := 1 / math.Sqrt(float64(fanIn))
			for i := range t.Data {
				t.Data[i] = float32((2*r.Float64() - 1) * bound)
			}
		default:
			for i := range t.Data {
				t.Data[i] = float32(0.02 * r.NormFloat64())
			}
		}
		out[name] = t
	}
	return out
}
