// Command svdheld measures how close an SVD UNet call with its weight matrices held in a
// compact type (--weights-dtype's conversion at load, nn.HoldAs) comes to the same call
// with float32 weights, as the relative L2 of the outputs, and where the difference comes
// from. It runs one of two UNets on the pure-Go backend with vdpp's CPU kernels:
//
//   - by default, a UNet of the released SVD widths (stabilityai/stable-video-diffusion-img2vid:
//     blocks of 320, 640, 1280 and 1280 channels, 5, 10, 20 and 20 heads of 64,
//     cross-attention width 1024, time embedding 1280) with -layers layers per block, its
//     weights drawn as PyTorch initialises the modules diffusers builds (every linear and
//     convolution weight and bias uniform in ±1/sqrt(fan_in), norms 1 and 0, every
//     mix_factor 0.5), each tensor from a generator seeded by its name, made one tensor at a
//     time so no float32 copy of the whole model exists besides the one being measured; on
//     random inputs shaped as one guided call makes them (two rows: sample N(0, 1) of
//     -frames x 8 x -height x -width, image embedding N(0, 1), added time ids 6, 127, 0.02,
//     timestep 0.7, as the golden dev case);
//   - with -model DIR, a diffusers folder's UNet (its fp32 weights) on the folder's
//     cases/unet_forward inputs (shared/golden/dev has them).
//
// Every weight type of -dtypes is measured with nn.HoldAs (the rule --weights-dtype uses:
// a matrix whose rows fit no block of the type takes the type's fallback, q4_K's being
// q5_0; embeddings stay as stored; convolutions' rows of 3 or 1 fit no block). For each it
// prints the relative L2 against the float32 call, the bytes held in each type, and each
// type's error on the weights themselves (relative L2 of the dequantized matrices). With
// -parts, a block type is measured again holding one part of those matrices at a time, the
// rest float32: the matrices of each type the rule picks, each kind of layer, the rules of
// the other GGUF converters for rows that fit no block (stable-diffusion.cpp's convert and
// --type leave them as stored; ComfyUI-GGUF's patched llama-quantize makes image models'
// f16, and its Q4_K_M mix raises to_v and ff.net.2 to q6_K), and the embeddings converted
// too (neither converter does that). -part picks parts by their description.
//
//	go run ./scripts/svdheld                                   # released widths, 1 layer per block, 2 frames of 8x8
//	go run ./scripts/svdheld -dtypes q4_k -parts               # and q4_K part by part
//	go run ./scripts/svdheld -model ../shared/golden/dev -parts
//
// The released-width UNet with one layer per block has 1.01 billion parameters: the
// float32 call holds 4.1 GB of weights (the process peaks at about 5.1 GiB), and each
// measurement builds its model again (generating and converting the weights takes most of
// the time: 25 minutes for -parts on 2 loaded cores).
package main

import (
	"flag"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/gomlx/gomlx/backends"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd/unet"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

// img2vidConfig is unet/config.json of stabilityai/stable-video-diffusion-img2vid, with
// layers_per_block left to fill in.
const img2vidConfig = `{
  "_class_name": "UNetSpatioTemporalConditionModel",
  "addition_time_embed_dim": 256,
  "block_out_channels": [320, 640, 1280, 1280],
  "cross_attention_dim": 1024,
  "down_block_types": ["CrossAttnDownBlockSpatioTemporal", "CrossAttnDownBlockSpatioTemporal", "CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"],
  "in_channels": 8,
  "layers_per_block": %d,
  "num_attention_heads": [5, 10, 20, 20],
  "num_frames": 14,
  "out_channels": 4,
  "projection_class_embeddings_input_dim": 768,
  "sample_size": 96,
  "transformer_layers_per_block": 1,
  "up_block_types": ["UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"]
}`

func main() {
	model := flag.String("model", "", "a diffusers folder whose UNet (fp32 weights, cases/unet_forward inputs) to measure instead of the released widths")
	layers := flag.Int("layers", 1, "layers per block of the released-width UNet")
	frames := flag.Int("frames", 2, "latent frames (released widths)")
	h := flag.Int("height", 8, "latent height (released widths)")
	w := flag.Int("width", 8, "latent width (released widths)")
	dtypes := flag.String("dtypes", "bf16,q8_0,q4_k", "weight types (or mixes) to measure, comma-separated: "+strings.Join(quant.DTypeFlags(), ", "))
	parts := flag.Bool("parts", false, "also measure each block type one part of the matrices at a time")
	only := flag.String("part", "", "with -parts, measure only the parts whose description contains this")
	widened := flag.Bool("widened", false, "also run each type's weights widened back to float32: the error of the weights alone, without the kernels' own")
	flag.Parse()
	// Collect garbage early: each build streams the whole model through the heap, which
	// with the default GOGC would let the process grow to twice the held weights.
	debug.SetGCPercent(10)
	if err := run(*model, *layers, *frames, *h, *w, *dtypes, *parts, *only, *widened); err != nil {
		fmt.Fprintln(os.Stderr, "svdheld:", err)
		os.Exit(1)
	}
}

// source hands over a UNet's weights one tensor at a time, as float32.
type source struct {
	cfg   unet.Config
	shape map[string][]int
	names []string
	get   func(name string) []float32
}

func run(model string, layers, frames, h, w int, dtypes string, parts bool, only string, widened bool) error {
	type dtype struct {
		t    quant.Type // the type, or a mix's base type
		rule nn.HoldFunc
		what string
		mix  bool
	}
	var types []dtype
	for _, s := range strings.Split(dtypes, ",") {
		s = strings.TrimSpace(s)
		if m, ok := quant.ParseMix(s); ok {
			types = append(types, dtype{m.Base, nn.HoldMix(m), m.Name + " (nn.HoldMix)", true})
			continue
		}
		t, err := quant.Parse(s)
		if err != nil {
			return fmt.Errorf("-dtypes: %w", quant.CheckDType(s))
		}
		types = append(types, dtype{t, nn.HoldAs(t), "every matrix (nn.HoldAs)", false})
	}
	b, err := nn.NewBackend("go")
	if err != nil {
		return err
	}
	if !nn.UsesKernels(b) {
		return fmt.Errorf("the go backend runs without vdpp's CPU kernels here: weights would be held as float32")
	}
	var src *source
	var in []*tensor.Dense
	if model != "" {
		src, in, err = folder(model)
	} else {
		src, in, err = released(layers, frames, h, w)
	}
	if err != nil {
		return err
	}
	var params int
	for _, n := range src.names {
		params += tensor.NumElements(src.shape[n])
	}
	fmt.Printf("unet: %s, %d parameters; sample %v\n\n", src.cfg, params, in[0].Shape)
	t0 := time.Now()
	want, _, _, err := call(b, src, in, f32, nil)
	if err != nil {
		return err
	}
	fmt.Printf("float32 call: output rms %.4g (%.0f s)\n\n", rms(want.Data), time.Since(t0).Seconds())
	fmt.Println("| weights | held in the type | relative L2 against float32 | held (MB by type) | seconds |")
	fmt.Println("| --- | --- | ---: | --- | ---: |")
	werr := map[quant.Type]*weightErr{}
	for _, dt := range types {
		t, rule := dt.t, dt.rule
		if err := measure(b, src, in, want, t, dt.what, rule, nil, werr); err != nil {
			return err
		}
		if widened {
			if err := measure(b, src, in, want, t, "every matrix, widened back to float32 (the weights' error alone)", f32, rule, nil); err != nil {
				return err
			}
		}
		if !parts || !t.Quantized() || dt.mix {
			continue
		}
		for _, p := range partsOf(src, t, rule) {
			if !strings.Contains(p.what, only) {
				continue
			}
			if err := measure(b, src, in, want, t, p.what, p.hold, nil, nil); err != nil {
				return err
			}
		}
	}
	fmt.Println("\n| type | matrices | parameters | relative L2 of the weights |")
	fmt.Println("| --- | ---: | ---: | ---: |")
	ts := make([]quant.Type, 0, len(werr))
	for t := range werr {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	for _, t := range ts {
		e := werr[t]
		fmt.Printf("| %v | %d | %d | %.3g |\n", t, e.n, e.params, math.Sqrt(e.num/e.den))
	}
	return nil
}

// weightErr sums the error of the dequantized weights of one type.
type weightErr struct {
	n, params int
	num, den  float64
}

// f32 holds every tensor as float32.
func f32(string, []int, quant.Type) quant.Type { return quant.F32 }

// measure builds the UNet holding its weights as hold says (widened as call says), runs it
// and prints the row.
func measure(b backends.Backend, src *source, in []*tensor.Dense, want *tensor.Dense, t quant.Type, what string, hold, widen nn.HoldFunc, werr map[quant.Type]*weightErr) error {
	t0 := time.Now()
	got, held, errs, err := call(b, src, in, hold, widen)
	if err != nil {
		return err
	}
	var hs []string
	for _, ht := range slices.Sorted(maps.Keys(held)) {
		hs = append(hs, fmt.Sprintf("%v %.1f", ht, float64(held[ht])/1e6))
	}
	fmt.Printf("| %v | %s | %.3g | %s | %.0f |\n", t, what, relL2(got.Data, want.Data), strings.Join(hs, ", "), time.Since(t0).Seconds())
	if werr != nil {
		for ht, e := range errs {
			if werr[ht] == nil {
				werr[ht] = e
			}
		}
	}
	return nil
}

// call builds the UNet with its weights held as hold says, runs it on in and frees it.
// With widen, each tensor widen holds in a compact type is rounded through that type and
// back to float32 before it loads. It returns the output, the bytes held per type and each
// compact type's weight error.
func call(b backends.Backend, src *source, in []*tensor.Dense, hold, widen nn.HoldFunc) (*tensor.Dense, map[quant.Type]int64, map[quant.Type]*weightErr, error) {
	errs := map[quant.Type]*weightErr{}
	w, err := nn.NewWeightsHeld(b, hold, func(add func(string, nn.StoredTensor) error) error {
		for _, n := range src.names {
			d := src.get(n)
			shape := src.shape[n]
			ht := hold(n, shape, quant.F32)
			if widen != nil {
				ht = widen(n, shape, quant.F32)
			}
			if ht != quant.F32 {
				e := errs[ht]
				if e == nil {
					e = &weightErr{}
					errs[ht] = e
				}
				back, num, den, err := roundTrip(ht, d)
				if err != nil {
					return fmt.Errorf("%s as %v: %w", n, ht, err)
				}
				e.n++
				e.params += len(d)
				e.num += num
				e.den += den
				if widen != nil {
					d = back
				}
			}
			raw, err := quant.Quantize(quant.F32, d)
			if err != nil {
				return err
			}
			if err := add(n, nn.StoredTensor{Shape: shape, Type: quant.F32, Data: raw}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, nil, err
	}
	m, err := unet.NewFromWeights(src.cfg, w)
	if err != nil {
		return nil, nil, nil, err
	}
	held := w.HeldBytes()
	out, err := m.Forward(in[0], in[1], in[2], in[3])
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if ferr := w.Free(); err == nil {
		err = ferr
	}
	runtime.GC()
	debug.FreeOSMemory()
	return out, held, errs, err
}

// roundTrip returns d quantized to t and back, its squared error and d's squared norm.
func roundTrip(t quant.Type, d []float32) (back []float32, num, den float64, err error) {
	raw, err := quant.Quantize(t, d)
	if err != nil {
		return nil, 0, 0, err
	}
	back = make([]float32, len(d))
	if err := quant.Dequantize(t, raw, back); err != nil {
		return nil, 0, 0, err
	}
	for i, v := range d {
		e := float64(back[i]) - float64(v)
		num += e * e
		den += float64(v) * float64(v)
	}
	return back, num, den, nil
}

// part is one subset of the matrices held in the type, the rest float32.
type part struct {
	what string
	hold nn.HoldFunc
}

// partsOf lists the parts measured for block type t: only the matrices the rule holds in
// each type, only each kind of layer, the other converters' rules for rows that fit no
// block, and the embeddings converted too.
func partsOf(src *source, t quant.Type, rule nn.HoldFunc) []part {
	only := func(keep func(name string, shape []int, ht quant.Type) bool) nn.HoldFunc {
		return func(name string, shape []int, stored quant.Type) quant.Type {
			if ht := rule(name, shape, stored); ht != quant.F32 && keep(name, shape, ht) {
				return ht
			}
			return quant.F32
		}
	}
	heldTypes := map[quant.Type]int{}
	kinds := map[string]int{}
	for _, n := range src.names {
		if ht := rule(n, src.shape[n], quant.F32); ht != quant.F32 {
			heldTypes[ht]++
			kinds[kind(n, src.shape[n])]++
		}
	}
	var ps []part
	if len(heldTypes) > 1 {
		for _, ht := range slices.Sorted(maps.Keys(heldTypes)) {
			ps = append(ps, part{fmt.Sprintf("only the %d matrices the rule holds as %v", heldTypes[ht], ht),
				only(func(_ string, _ []int, x quant.Type) bool { return x == ht })})
		}
	}
	if len(kinds) > 1 {
		for _, k := range slices.Sorted(maps.Keys(kinds)) {
			ps = append(ps, part{fmt.Sprintf("only the %d %s matrices", kinds[k], k),
				only(func(name string, shape []int, _ quant.Type) bool { return kind(name, shape) == k })})
		}
	}
	if heldTypes[t] > 0 && len(heldTypes) > 1 {
		ps = append(ps,
			part{fmt.Sprintf("only the %d matrices whose rows fit %v: the rest as stored (stable-diffusion.cpp's convert and --type)", heldTypes[t], t),
				only(func(_ string, _ []int, x quant.Type) bool { return x == t })},
			part{fmt.Sprintf("rows that fit no %v block as f16 (ComfyUI-GGUF's llama-quantize for image models)", t),
				func(name string, shape []int, stored quant.Type) quant.Type {
					if ht := rule(name, shape, stored); ht != quant.F32 && ht != t {
						return quant.F16
					} else {
						return ht
					}
				}})
	}
	if t == quant.Q4_K && heldTypes[t] > 0 && len(heldTypes) > 1 {
		// ComfyUI-GGUF's lcpp.patch (img_tensor_get_type) for a Q4_K_M file: attention's
		// to_v and the feed-forward's output as q6_K, rows that fit no k-quant block f16.
		ps = append(ps, part{"Q4_K_M as ComfyUI-GGUF's llama-quantize makes it for image models: to_v and ff.net.2 as q6_K, rows that fit no block f16",
			func(name string, shape []int, stored quant.Type) quant.Type {
				ht := rule(name, shape, stored)
				switch {
				case ht == quant.F32:
					return ht
				case ht != t:
					return quant.F16
				case strings.HasSuffix(name, ".to_v.weight") || strings.HasSuffix(name, ".ff.net.2.weight"):
					return quant.Q6_K
				}
				return ht
			}})
	}
	ps = append(ps, part{"every matrix and the embeddings too (neither converter converts embeddings)",
		func(name string, shape []int, stored quant.Type) quant.Type {
			if len(shape) >= 2 && strings.HasSuffix(name, ".weight") && strings.Contains(name, "embed") {
				return t.Fallback(shape[len(shape)-1], stored)
			}
			return rule(name, shape, stored)
		}})
	return ps
}

// kind names the kind of layer a weight matrix belongs to.
func kind(name string, shape []int) string {
	switch {
	case len(shape) > 2:
		return "convolution"
	case strings.Contains(name, ".attn1.") || strings.Contains(name, ".attn2."):
		return "attention (to_q, to_k, to_v, to_out)"
	case strings.Contains(name, ".ff.") || strings.Contains(name, ".ff_in."):
		return "feed-forward (ff, ff_in)"
	case strings.Contains(name, ".proj_in.") || strings.Contains(name, ".proj_out."):
		return "proj_in and proj_out"
	case strings.Contains(name, "time_emb_proj"):
		return "resnets' time_emb_proj"
	case strings.Contains(name, "embed"):
		return "embedding"
	}
	return "other"
}

// released returns the released-width UNet with random weights and random inputs.
func released(layers, frames, h, w int) (*source, []*tensor.Dense, error) {
	cfg, err := unet.ParseConfig("stable-video-diffusion-img2vid (layers_per_block "+fmt.Sprint(layers)+")", fmt.Appendf(nil, img2vidConfig, layers))
	if err != nil {
		return nil, nil, err
	}
	exp, err := unet.ExpectedTensors(cfg)
	if err != nil {
		return nil, nil, err
	}
	src := &source{cfg: cfg, shape: exp, names: slices.Sorted(maps.Keys(exp))}
	src.get = func(name string) []float32 { return torchInit(name, exp) }
	r := rand.New(rand.NewPCG(1, 2))
	sample := randn(r, 2, frames, cfg.InChannels, h, w)
	ehs := randn(r, 2, 1, cfg.CrossAttentionDim[len(cfg.CrossAttentionDim)-1])
	ids := &tensor.Dense{Shape: []int{2, 3}, Data: []float32{6, 127, 0.02, 6, 127, 0.02}}
	ts := &tensor.Dense{Shape: []int{1}, Data: []float32{0.7}}
	return src, []*tensor.Dense{sample, ts, ehs, ids}, nil
}

// torchInit draws tensor name as PyTorch initialises diffusers' modules: nn.Linear and
// nn.Conv weights and biases uniform in ±1/sqrt(fan_in) (kaiming_uniform with a = √5),
// GroupNorm and LayerNorm weights 1 and biases 0, AlphaBlender's mix_factor 0.5.
func torchInit(name string, exp map[string][]int) []float32 {
	shape := exp[name]
	d := make([]float32, tensor.NumElements(shape))
	fill := func(v float32) []float32 {
		for i := range d {
			d[i] = v
		}
		return d
	}
	fanIn := 0
	switch {
	case strings.HasSuffix(name, "mix_factor"):
		return fill(0.5)
	case strings.HasSuffix(name, ".weight") && len(shape) >= 2:
		fanIn = tensor.NumElements(shape[1:])
	case strings.HasSuffix(name, ".weight"):
		return fill(1)
	case strings.HasSuffix(name, ".bias"):
		ws, ok := exp[strings.TrimSuffix(name, ".bias")+".weight"]
		if !ok || len(ws) < 2 {
			return fill(0)
		}
		fanIn = tensor.NumElements(ws[1:])
	default:
		panic("svdheld: no initialisation for " + name)
	}
	f := fnv.New64a()
	f.Write([]byte(name))
	r := rand.New(rand.NewPCG(f.Sum64(), 7))
	bound := 1 / math.Sqrt(float64(fanIn))
	for i := range d {
		d[i] = float32((2*r.Float64() - 1) * bound)
	}
	return d
}

// folder returns a diffusers folder's UNet and its unet_forward case inputs.
func folder(dir string) (*source, []*tensor.Dense, error) {
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := unet.ReadConfig(ck)
	if err != nil {
		return nil, nil, err
	}
	st, err := unet.OpenWeights(ck, cfg, unet.LoadOptions{})
	if err != nil {
		return nil, nil, err
	}
	ws, err := st.Tensors()
	st.Close()
	if err != nil {
		return nil, nil, err
	}
	src := &source{cfg: cfg, shape: map[string][]int{}, get: func(name string) []float32 { return ws[name].Data }}
	for n, d := range ws {
		src.shape[n] = d.Shape
	}
	src.names = slices.Sorted(maps.Keys(src.shape))
	path := filepath.Join(dir, "cases", "unet_forward", "inputs.safetensors")
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("the inputs of %s: %w", dir, err)
	}
	defer f.Close()
	var in []*tensor.Dense
	for _, n := range []string{"sample", "timestep", "encoder_hidden_states", "added_time_ids"} {
		d, err := f.Tensor(n)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		in = append(in, d)
	}
	return src, in, nil
}

func randn(r *rand.Rand, shape ...int) *tensor.Dense {
	d := tensor.New(shape...)
	for i := range d.Data {
		d.Data[i] = float32(r.NormFloat64())
	}
	return d
}

func relL2(got, want []float32) float64 {
	var num, den float64
	for i := range got {
		e := float64(got[i]) - float64(want[i])
		num += e * e
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}

func rms(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s / float64(len(x)))
}
