package main

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/gguf"
	"github.com/vdpp/vdpp/internal/goldentest"
	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/model/wan/wantest"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

// The dev Wan 2.2 folder's experts as single f32 files, Wan's original safetensors for the
// high-noise expert and stable-diffusion.cpp's GGUF for the low-noise one, give the
// folder's frames bit for bit, in one process and on a 2-stage pipeline (one expert per
// stage); the low-noise expert as ComfyUI-GGUF writes it at q8_0 runs too (other frames).
func TestGenerateWanSingleFiles(t *testing.T) {
	t.Parallel()
	dev := shared.Require(t, "golden", "wan-dev")
	embeds := filepath.Join(dev, "cases", "full_pipeline_moe", "inputs.safetensors")
	common := []string{"--model", dev, "--prompt-embeds", embeds, "--negative-prompt-embeds", embeds,
		"--num-frames", "5", "--height", "32", "--width", "32", "--steps", "4", "--seed", "11", "--guidance-scale", "4"}
	tmp := t.TempDir()
	file := func(expert string, layout wantest.Layout, typ quant.Type) string {
		w := goldentest.ReadTensors(t, filepath.Join(dev, expert, "diffusion_pytorch_model.safetensors"))
		path := filepath.Join(tmp, expert+"-"+layout.String()+"-"+typ.String())
		wantest.WriteTransformerFile(t, w, path, layout, typ)
		return path
	}
	high := file("transformer", wantest.OriginalSafetensors, quant.F32)
	low := file("transformer_2", wantest.SDCppGGUF, quant.F32)
	lowQ8 := file("transformer_2", wantest.ComfyGGUF, quant.Q8_0)
	with := func(args ...string) []string { return append(append([]string(nil), common...), args...) }

	folder := runGenerateBin(t, with("--nproc", "1")...)
	files := runGenerateBin(t, with("--nproc", "1", "--transformer", high, "--transformer-2", low)...)
	requireSameFrames(t, folder, files, "sample-000", 5, "--transformer (original safetensors) and --transformer-2 (sd.cpp GGUF)")
	staged := runGenerateBin(t, with("--nproc", "2", "--transformer", high, "--transformer-2", low)...)
	requireSameFrames(t, folder, staged, "sample-000", 5, "the files on 2 stages")
	q8 := readFrames(t, runGenerateBin(t, with("--nproc", "1", "--transformer-2", lowQ8)...))
	if len(q8) != 5 || sameFrames(q8, readFrames(t, folder)) {
		t.Errorf("--transformer-2 at q8_0: %d frames, the folder's: %v", len(q8), sameFrames(q8, readFrames(t, folder)))
	}
}

// --weights-dtype converts the experts at load: q8_0 gives other frames than the folder's
// float32, the same on 1 and 2 stages, and report.json counts the bytes held in each type
// (q8_0 about a quarter of float32 for the matrices); f32 gives the folder's frames.
func TestGenerateWeightsDType(t *testing.T) {
	t.Parallel()
	dev := shared.Require(t, "golden", "wan-dev")
	embeds := filepath.Join(dev, "cases", "full_pipeline_moe", "inputs.safetensors")
	common := []string{"--model", dev, "--prompt-embeds", embeds, "--negative-prompt-embeds", embeds,
		"--num-frames", "5", "--height", "32", "--width", "32", "--steps", "4", "--seed", "11", "--guidance-scale", "4"}
	with := func(args ...string) []string { return append(append([]string(nil), common...), args...) }
	folder := runGenerateBin(t, with("--nproc", "1")...)
	f32 := runGenerateBin(t, with("--nproc", "1", "--weights-dtype", "f32")...)
	requireSameFrames(t, folder, f32, "sample-000", 5, "--weights-dtype f32")
	q8 := runGenerateBin(t, with("--nproc", "1", "--weights-dtype", "q8_0")...)
	if sameFrames(readFrames(t, q8), readFrames(t, folder)) {
		t.Fatal("--weights-dtype q8_0 gave the float32 frames")
	}
	q8two := runGenerateBin(t, with("--nproc", "2", "--weights-dtype", "q8_0")...)
	requireSameFrames(t, q8, q8two, "sample-000", 5, "q8_0 on 2 stages")
	byType := func(out string) map[string]int64 {
		var r struct {
			Stages []struct {
				Types map[string]int64 `json:"weight_bytes_by_type"`
			} `json:"stages"`
		}
		data, err := os.ReadFile(filepath.Join(out, "sample-000", "report.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &r); err != nil || len(r.Stages) == 0 {
			t.Fatalf("report.json: %v\n%s", err, data)
		}
		sum := map[string]int64{}
		for _, st := range r.Stages {
			for k, v := range st.Types {
				sum[k] += v
			}
		}
		return sum
	}
	bf, bq := byType(folder), byType(q8)
	if len(bf) != 1 || bf["f32"] == 0 || bq["q8_0"] == 0 || bq["f32"] == 0 || bq["f32"] >= bf["f32"] || bq["q8_0"]+bq["f32"] >= bf["f32"] {
		t.Errorf("bytes by type: folder %v, q8_0 %v", bf, bq)
	}
	if two := byType(q8two); two["q8_0"] != bq["q8_0"] {
		t.Errorf("q8_0 bytes on 2 stages %v, one %v", two, bq)
	}
}

// The built-in SVD model's UNet as one f32 GGUF (diffusers' names) gives its frames bit
// for bit.
func TestGenerateUNetFile(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "builtin", "model")
	w := goldentest.ReadTensors(t, filepath.Join(dir, "unet", "diffusion_pytorch_model.safetensors"))
	names := make([]string, 0, len(w))
	for n := range w {
		names = append(names, n)
	}
	sort.Strings(names)
	gw := gguf.NewWriter()
	for _, n := range names {
		if err := gw.AddFloat32(n, quant.F32, w[n].Shape, w[n].Data); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "unet.gguf")
	if err := gw.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	common := []string{"--model", "builtin", "--image", testImage(t), "--steps", "2", "--num-frames", "3", "--seed", "2"}
	folder := runGenerateBin(t, common...)
	file := runGenerateBin(t, append(common, "--unet", path)...)
	requireSameFrames(t, folder, file, "sample-000", 3, "--unet (GGUF)")
}

// Weight options a model cannot take are one line naming the flag, before anything loads;
// a weights file with a tensor missing, one too many, one of the wrong shape or of a ggml
// type vdpp does not read is one line naming the file and the tensor (its name in the
// network and, where they differ, in the file).
func TestGenerateWeightOptionErrors(t *testing.T) {
	t.Parallel()
	dev := shared.Require(t, "golden", "wan-dev")
	embeds := filepath.Join(dev, "cases", "full_pipeline_moe", "inputs.safetensors")
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	if err := os.WriteFile(bad, []byte("GGUF\x03\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	wan := []string{"--model", dev, "--prompt-embeds", embeds, "--negative-prompt-embeds", embeds}
	// The high-noise expert's weights as a GGUF (diffusers' names), each with one problem: a tensor missing,
	// one the network does not have, one of the wrong shape, one of a ggml type vdpp does
	// not read (IQ2_XXS).
	expert := goldentest.ReadTensors(t, filepath.Join(dev, "transformer", "diffusion_pytorch_model.safetensors"))
	broken := func(name string, change func(gw *gguf.Writer, n string, d *tensor.Dense) bool) string {
		names := make([]string, 0, len(expert))
		for n := range expert {
			names = append(names, n)
		}
		sort.Strings(names)
		gw := gguf.NewWriter()
		for _, n := range names {
			if change(gw, n, expert[n]) {
				continue
			}
			if err := gw.AddFloat32(n, quant.F32, expert[n].Shape, expert[n].Data); err != nil {
				t.Fatal(err)
			}
		}
		path := filepath.Join(t.TempDir(), name+".gguf")
		if err := gw.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	missing := broken("missing", func(_ *gguf.Writer, n string, _ *tensor.Dense) bool { return n == "blocks.1.attn2.to_k.bias" })
	extra := broken("extra", func(gw *gguf.Writer, n string, _ *tensor.Dense) bool {
		if n == "proj_out.bias" {
			gw.AddFloat32("extra.weight", quant.F32, []int{2}, make([]float32, 2))
		}
		return false
	})
	shape := broken("shape", func(gw *gguf.Writer, n string, d *tensor.Dense) bool {
		if n != "blocks.0.ffn.net.2.weight" {
			return false
		}
		gw.AddFloat32(n, quant.F32, []int{d.Shape[0], d.Shape[1] / 2}, d.Data[:len(d.Data)/2])
		return true
	})
	iq := broken("iq", func(gw *gguf.Writer, n string, d *tensor.Dense) bool {
		if n != "blocks.0.attn1.to_q.weight" {
			return false
		}
		gw.Add(n, quant.Type(16), d.Shape, make([]byte, 66))
		return true
	})
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(wan, "--weights-dtype", "q3"), `--weights-dtype: unknown weight type "q3" (one of f32, f16, bf16, q8_0`},
		{append(wan, "--unet", bad), "--unet: a wan model has no unet component (it takes --transformer, --transformer-2)"},
		{append(wan, "--transformer", bad), bad + ": gguf: truncated file: the tensor count"},
		{append(wan, "--transformer", missing), missing + ` (read as Wan's original layout): tensor "blocks.1.attn2.to_k.bias" ("blocks.1.cross_attn.k.bias" in the file): missing from the file (expected shape [40])`},
		{append(wan, "--transformer-2", extra), extra + ` (read as Wan's original layout): tensor "extra.weight": unexpected (shape [2], f32 in file)`},
		{append(wan, "--transformer", shape), shape + ` (read as Wan's original layout): tensor "blocks.0.ffn.net.2.weight": shape [40 32] in file, expected [40 64]`},
		{append(wan, "--transformer", iq), iq + ` (read as Wan's original layout): tensor "blocks.0.attn1.to_q.weight": type ggml type 16 in file is not one vdpp reads`},
	} {
		cmd := exec.Command(vdpp(t), append([]string{"generate", "--out", t.TempDir(), "--num-frames", "5", "--height", "32", "--width", "32", "--steps", "2"}, c.args...)...)
		out, err := cmd.CombinedOutput()
		msg := strings.TrimSpace(string(out))
		if err == nil || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.want) {
			t.Errorf("%v: want one line containing %q, got (%v):\n%s", c.args, c.want, err, msg)
		}
	}
}

// vdpp plan sizes Wan 2.2 A14B (the released configs, model/wan/testdata/a14b) by weight
// type: with --weights-dtype q8_0 and 16 GiB devices it places the two experts as pp2,
// one per device with the decoder on the second, and says dp2 does not fit; in float32
// nothing fits.
func TestPlanA14B(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cal := filepath.Join(dir, "cal.json")
	if err := os.WriteFile(cal, []byte(`{"version": 1, "model": "a14b", "latent_shape": [21, 16, 60, 104], "costs": {"step": {"row_ms": 60000, "ref_frames": 21, "frame_scaling": 1},
		"hand_off": {"latency_ms": 1, "bytes_per_s": 1e9}, "collective": {"latency_ms": 1, "bytes_per_s": 1e9}, "activation_bytes_per_row_frame": 1000000}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	type mesh struct {
		PP, CFG, CP, DP int
		Feasible        bool
		Weight          int64 `json:"weight_bytes_per_device"`
	}
	run := func(dtype string) (configs, infeasible []mesh, types map[string]int64, stdout string) {
		t.Helper()
		js := filepath.Join(dir, dtype+".json")
		cmd := exec.Command(vdpp(t), "plan", "--model", filepath.Join("..", "..", "model", "wan", "testdata", "a14b"), "--calibration", cal,
			"--weights-dtype", dtype, "--devices", "2", "--memory-per-device", "17179869184", "--num-samples", "4", "--json", js)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("vdpp plan: %v\n%s", err, out)
		}
		var r struct {
			Configs, Infeasible []mesh
			Costs               struct {
				Weights struct {
					Types map[string]int64 `json:"types"`
				} `json:"weights"`
			} `json:"costs"`
		}
		data, _ := os.ReadFile(js)
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatal(err)
		}
		return r.Configs, r.Infeasible, r.Costs.Weights.Types, string(out)
	}
	configs, infeasible, types, out := run("q8_0")
	if len(configs) != 1 || configs[0].PP != 2 || configs[0].DP != 1 || configs[0].Weight > 16<<30 {
		t.Errorf("q8_0: feasible %+v, want pp2 alone under 16 GiB\n%s", configs, out)
	}
	dp2 := false
	for _, m := range infeasible {
		dp2 = dp2 || (m.DP == 2 && m.PP == 1)
	}
	if !dp2 {
		t.Errorf("q8_0: dp2 is not among the meshes that do not fit: %+v", infeasible)
	}
	// 2 x 14.06e9 matrix weights at 34 bytes per 32; the embedders, norms, biases and the VAE
	// in float32.
	if q := types["q8_0"]; q < 29.5e9 || q > 30.2e9 || types["f32"] == 0 || len(types) != 2 {
		t.Errorf("q8_0: bytes by type %v", types)
	}
	for _, want := range []string{"**Weights by type:** 27.81 GiB q8_0, 2.24 GiB f32", "vdpp generate --model ", "--weights-dtype q8_0 "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if configs, _, types, _ := run("auto"); len(configs) != 0 || len(types) != 1 || types["f32"] < 114e9 {
		t.Errorf("float32: feasible %+v, types %v", configs, types)
	}
}

// The file stable-diffusion.cpp's own convert wrote (model/wan/transformer/testdata/sdcpp:
// q8_0, 4-dim patch embedding, modulations without their outer 1) and a file written the
// ComfyUI-GGUF way from the same random weights (q8_0, the 5-dim patch embedding flattened
// with comfy.gguf.orig_shape) load through --transformer and --transformer-2 into a folder
// that has only configs: each gives, on a backend without the fused kernels (every tensor
// widened at load), the frames of the f32 original-layout file of its own widened weights
// bit for bit, and held compact in q8_0 on the default backend, a video too.
func TestGenerateGGUFFlavours(t *testing.T) {
	t.Parallel()
	src := filepath.Join("..", "..", "model", "wan", "transformer", "testdata", "sdcpp")
	cfg, err := transformer.ReadConfig(src)
	if err != nil {
		t.Fatal(err)
	}
	var cfgMap map[string]any
	data, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &cfgMap); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"in_channels", "out_channels", "num_layers", "num_attention_heads", "attention_head_dim", "ffn_dim", "freq_dim", "text_dim", "rope_max_seq_len"} {
		cfgMap[k] = int(cfgMap[k].(float64))
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	wantest.WriteMoEFolder(t, model, cfgMap, 3)
	emb := tensor.New(6, cfg.TextDim)
	for i := range emb.Data {
		emb.Data[i] = float32(i%7)/7 - 0.5
	}
	embeds := filepath.Join(dir, "embeds.safetensors")
	if err := safetensors.WriteMapFile(embeds, map[string]*tensor.Dense{"prompt_embeds": emb}, nil); err != nil {
		t.Fatal(err)
	}
	weights := wantest.RandomWeights(t, cfg, 2026) // what the sd.cpp file was converted from
	comfy := filepath.Join(dir, "comfy-q8_0.gguf")
	wantest.WriteTransformerFile(t, weights, comfy, wantest.ComfyGGUF, quant.Q8_0)
	common := []string{"--model", model, "--prompt-embeds", embeds, "--negative-prompt-embeds", embeds, "--num-frames", "5",
		"--height", "32", "--width", "32", "--steps", "3", "--guidance-scale", "4", "--seed", "7"}
	for _, f := range []struct{ name, path string }{{"stable-diffusion.cpp's convert", filepath.Join(src, "transformer-q8_0.gguf")}, {"ComfyUI-GGUF", comfy}} {
		st, err := transformer.OpenWeights(filepath.Join(model, "transformer"), cfg, transformer.LoadOptions{File: f.path})
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		wide, err := st.Tensors()
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		// The names map onto the network: each tensor is the original within q8_0's error.
		for n, w := range weights {
			if rel := relL2(wide[n].Data, w.Data); rel > 1e-2 {
				t.Errorf("%s: tensor %s is %.3g from the weights it was converted from", f.name, n, rel)
			}
		}
		f32 := filepath.Join(dir, "widened.safetensors")
		wantest.WriteTransformerFile(t, wide, f32, wantest.OriginalSafetensors, quant.F32)
		with := func(file string, args ...string) []string {
			return append(append(append([]string(nil), common...), "--transformer", file, "--transformer-2", file), args...)
		}
		ref := runGenerateBin(t, with(f32, "--backend", "go:kernels=off")...)
		got := runGenerateBin(t, with(f.path, "--backend", "go:kernels=off")...)
		requireSameFrames(t, ref, got, "sample-000", 5, f.name+"'s file widened at load")
		held := runGenerateBin(t, with(f.path)...)
		if n := len(readFrames(t, held)); n != 5 {
			t.Errorf("%s held in q8_0: %d frames", f.name, n)
		}
		rep, err := os.ReadFile(filepath.Join(held, "sample-000", "report.json"))
		if err != nil || !strings.Contains(string(rep), `"q8_0"`) {
			t.Errorf("%s: report.json holds no q8_0 bytes (%v)", f.name, err)
		}
	}
}

func relL2(got, want []float32) float64 {
	var num, den float64
	for i := range got {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}
