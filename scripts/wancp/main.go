// Command wancp measures Wan context parallelism on the machine it runs on. With -write DIR it writes
// a two-expert Wan folder with random weights (the dev folder's model_index.json,
// scheduler and VAE, and two transformers of the configured size) for `vdpp bench --model
// DIR`. With -time DIR it times one call of DIR/transformer on a guided step's batch
// (an unconditional and a conditional row) on one rank and over -cp in-process ranks
// (Ulysses, transformer.Model.ForwardFrames over the in-memory transport), and prints one
// JSON line: every call's wall milliseconds, the minimum and the median, and the relative
// L2 of the joined context-parallel output to the one-rank output.
//
//	go run ./scripts/wancp -write /tmp/wancp/model [-from DIR]
//	go run ./scripts/wancp -time /tmp/wancp/model -frames 6 -height 32 -width 32 [-cp 2]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

func main() {
	write := flag.String("write", "", "write a random two-expert Wan folder here")
	from := flag.String("from", "", "folder whose model_index.json, scheduler and vae are copied (default: the shared wan-dev folder)")
	heads := flag.Int("heads", 8, "attention heads")
	headDim := flag.Int("head-dim", 64, "attention head dim")
	ffn := flag.Int("ffn", 1536, "feed-forward dim")
	layers := flag.Int("layers", 4, "layers")
	textDim := flag.Int("text-dim", 64, "text embedding width")
	timeDir := flag.String("time", "", "time the transformer of this folder")
	frames := flag.Int("frames", 6, "latent frames")
	height := flag.Int("height", 32, "latent height")
	width := flag.Int("width", 32, "latent width")
	cp := flag.Int("cp", 2, "context-parallel ranks")
	iters := flag.Int("iters", 3, "timed calls")
	flag.Parse()
	var err error
	switch {
	case *write != "":
		if *from == "" {
			if *from, err = shared.Path("golden", "wan-dev"); err != nil {
				break
			}
		}
		err = writeFolder(*write, *from, *heads, *headDim, *ffn, *layers, *textDim)
	case *timeDir != "":
		err = timeCall(*timeDir, *frames, *height, *width, *cp, *iters)
	default:
		err = errors.New("give -write DIR or -time DIR")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "wancp:", err)
		os.Exit(1)
	}
}

func copyFile(dst, src string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

func writeFolder(dir, from string, heads, headDim, ffn, layers, textDim int) error {
	for _, f := range []string{"model_index.json", "scheduler/scheduler_config.json", "vae/config.json", "vae/diffusion_pytorch_model.safetensors"} {
		if err := copyFile(filepath.Join(dir, f), filepath.Join(from, f)); err != nil {
			return err
		}
	}
	devCfg, err := transformer.ReadConfig(filepath.Join(from, "transformer"))
	if err != nil {
		return err
	}
	cfg := map[string]any{
		"_class_name": "WanTransformer3DModel", "_diffusers_version": "0.35.2", "added_kv_proj_dim": nil,
		"attention_head_dim": headDim, "cross_attn_norm": true, "eps": 1e-6, "ffn_dim": ffn, "freq_dim": 256,
		"image_dim": nil, "in_channels": devCfg.InChannels, "num_attention_heads": heads, "num_layers": layers,
		"out_channels": devCfg.OutChannels, "patch_size": []int{1, 2, 2}, "pos_embed_seq_len": nil,
		"qk_norm": "rms_norm_across_heads", "rope_max_seq_len": 1024, "text_dim": textDim,
	}
	js, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	for i, name := range []string{"transformer", "transformer_2"} {
		sub := filepath.Join(dir, name)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(sub, "config.json"), js, 0o644); err != nil {
			return err
		}
		tc, err := transformer.ReadConfig(sub)
		if err != nil {
			return err
		}
		exp, err := transformer.ExpectedTensors(tc)
		if err != nil {
			return err
		}
		r := rand.New(rand.NewPCG(uint64(i), 7))
		var ts []safetensors.NamedTensor
		for _, n := range slices.Sorted(func(yield func(string) bool) {
			for n := range exp {
				if !yield(n) {
					return
				}
			}
		}) {
			d := tensor.New(exp[n]...)
			scale := 0.02
			if len(exp[n]) == 1 || n == "scale_shift_table" {
				scale = 0.1
			}
			for j := range d.Data {
				d.Data[j] = float32(r.NormFloat64() * scale)
			}
			ts = append(ts, safetensors.NamedTensor{Name: n, Tensor: d})
		}
		if err := safetensors.WriteFile(filepath.Join(sub, transformer.WeightsStem+".safetensors"), ts, nil); err != nil {
			return err
		}
	}
	return nil
}

func randDense(r *rand.Rand, shape ...int) *tensor.Dense {
	d := tensor.New(shape...)
	for i := range d.Data {
		d.Data[i] = float32(r.NormFloat64())
	}
	return d
}

// sliceFrames copies frames [lo, hi) of hidden [B, C, F, H, W].
func sliceFrames(x *tensor.Dense, lo, hi int) *tensor.Dense {
	s := x.Shape
	outer, f, inner := s[0]*s[1], s[2], s[3]*s[4]
	out := tensor.New(s[0], s[1], hi-lo, s[3], s[4])
	for o := range outer {
		copy(out.Data[o*(hi-lo)*inner:(o+1)*(hi-lo)*inner], x.Data[(o*f+lo)*inner:(o*f+hi)*inner])
	}
	return out
}

// joinFrames is the inverse of sliceFrames over consecutive shards.
func joinFrames(parts []*tensor.Dense) *tensor.Dense {
	s := slices.Clone(parts[0].Shape)
	total := 0
	for _, p := range parts {
		total += p.Shape[2]
	}
	s[2] = total
	out := tensor.New(s...)
	inner := s[3] * s[4]
	at := 0
	for _, p := range parts {
		fp := p.Shape[2]
		for o := range s[0] * s[1] {
			copy(out.Data[(o*total+at)*inner:(o*total+at+fp)*inner], p.Data[o*fp*inner:(o+1)*fp*inner])
		}
		at += fp
	}
	return out
}

func timeCall(dir string, frames, height, width, cp, iters int) error {
	b, err := nn.NewBackend("go")
	if err != nil {
		return err
	}
	m, err := transformer.Load(filepath.Join(dir, "transformer"), "", b)
	if err != nil {
		return err
	}
	defer m.Close()
	cfg := m.Config()
	r := rand.New(rand.NewPCG(1, 2))
	hidden := randDense(r, 2, cfg.InChannels, frames, height, width)
	ts := &tensor.Dense{Shape: []int{2}, Data: []float32{700, 700}}
	ehs := randDense(r, 2, transformer.TextContextLen, cfg.TextDim)

	// Shards: consecutive frame ranges, sizes differing by at most one.
	ranges, err := transformer.HeadRanges(frames, cp)
	if err != nil {
		return err
	}
	trs := comm.NewLocal(cp, comm.Options{RecvTimeout: 5 * time.Minute})
	groups := make([]*comm.Group, cp)
	all := make([]int, cp)
	for i := range all {
		all[i] = i
	}
	for i := range groups {
		if groups[i], err = comm.NewGroup(trs[i], all); err != nil {
			return err
		}
	}
	one := func() (*tensor.Dense, error) { return m.Forward(hidden, ts, ehs, nil) }
	par := func() (*tensor.Dense, error) {
		outs := make([]*tensor.Dense, cp)
		errs := make([]error, cp)
		var wg sync.WaitGroup
		for i, rg := range ranges {
			wg.Go(func() {
				part := transformer.Frames{Lo: rg[0], Hi: rg[1], Total: frames}
				outs[i], errs[i] = m.ForwardFrames(context.Background(), sliceFrames(hidden, rg[0], rg[1]), ts, ehs, nil, part, groups[i])
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		return joinFrames(outs), nil
	}
	res := map[string]any{"config": fmt.Sprintf("%d heads x %d, ffn %d, %d layers", cfg.NumAttentionHeads, cfg.AttentionHeadDim, cfg.FFNDim, cfg.NumLayers),
		"hidden": hidden.Shape, "tokens": frames * height * width / 4, "cp": cp, "threads_note": "in-process ranks share the machine's cores"}
	outs := map[string]*tensor.Dense{}
	for _, c := range []struct {
		name string
		fn   func() (*tensor.Dense, error)
	}{{"cp1", one}, {fmt.Sprintf("cp%d", cp), par}} {
		if _, err := c.fn(); err != nil { // compile
			return err
		}
		var ms []float64
		for range iters {
			t0 := time.Now()
			out, err := c.fn()
			if err != nil {
				return err
			}
			ms = append(ms, float64(time.Since(t0).Microseconds())/1000)
			outs[c.name] = out
		}
		sorted := slices.Clone(ms)
		slices.Sort(sorted)
		res[c.name+"_ms"] = ms
		res[c.name+"_min_ms"] = sorted[0]
		res[c.name+"_median_ms"] = sorted[len(sorted)/2]
	}
	res["rel_l2"] = tensor.RelL2(outs[fmt.Sprintf("cp%d", cp)], outs["cp1"])
	return json.NewEncoder(os.Stdout).Encode(res)
}
