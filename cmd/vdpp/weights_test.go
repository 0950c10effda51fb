package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/gguf"
	"github.com/vdpp/vdpp/internal/goldentest"
	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/wan/wantest"
	"github.com/vdpp/vdpp/tensor/quant"
)

// The dev Wan 2.2 folder's experts as single f32 files, Wan's original safetensors for the
// high-noise expert and stable-diffusion.cpp's GGUF for the low-noise one, give the
// folder's frames bit for bit, in one process and on a 2-stage pipeline (one expert per
// stage); the low-noise expert as ComfyUI-GGUF writes it at q8_0 runs too (other frames).
func TestGenerateWanSingleFiles(t *testing.T) {
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

// Weight options a model cannot take are one line naming the flag, before anything loads.
func TestGenerateWeightOptionErrors(t *testing.T) {
	dev := shared.Require(t, "golden", "wan-dev")
	embeds := filepath.Join(dev, "cases", "full_pipeline_moe", "inputs.safetensors")
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	if err := os.WriteFile(bad, []byte("GGUF\x03\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	wan := []string{"--model", dev, "--prompt-embeds", embeds, "--negative-prompt-embeds", embeds}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(wan, "--weights-dtype", "q3"), `--weights-dtype: unknown weight type "q3" (one of f32, f16, bf16, q8_0`},
		{append(wan, "--unet", bad), "--unet: a wan model has no unet component (it takes --transformer, --transformer-2)"},
		{append(wan, "--transformer", bad), bad + ": gguf: truncated file: the tensor count"},
		{[]string{"--model", "builtin", "--image", "x.png", "--transformer", bad}, "--transformer: a svd model has no transformer component (it takes --unet)"},
	} {
		cmd := exec.Command(vdppBin, append([]string{"generate", "--out", t.TempDir(), "--num-frames", "5", "--height", "32", "--width", "32", "--steps", "2"}, c.args...)...)
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
		cmd := exec.Command(vdppBin, "plan", "--model", filepath.Join("..", "..", "model", "wan", "testdata", "a14b"), "--calibration", cal,
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
