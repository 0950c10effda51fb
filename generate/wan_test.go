package generate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/lora"
	"github.com/vdpp/vdpp/model/wan/wantest"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// Bad input to a Wan generation is one line naming the flag or the file.
func TestResolveWanErrors(t *testing.T) {
	dev := shared.Require(t, "golden", "wan-dev")
	embeds := filepath.Join(dev, "cases", "full_pipeline_moe", "inputs.safetensors")
	tmp := t.TempDir()
	narrow := filepath.Join(tmp, "narrow.safetensors")
	if err := safetensors.WriteFile(narrow, []safetensors.NamedTensor{{Name: "prompt_embeds", Tensor: tensor.New(1, 5, 16)}}, nil); err != nil {
		t.Fatal(err)
	}
	noExpert := filepath.Join(tmp, "no-expert")
	if err := os.MkdirAll(noExpert, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"model_index.json", "transformer", "vae", "scheduler"} {
		if err := os.Symlink(filepath.Join(dev, c), filepath.Join(noExpert, c)); err != nil {
			t.Fatal(err)
		}
	}
	svdLoRA, _ := filepath.Abs(filepath.Join("..", "model", "lora", "testdata", "lora_svd_kohya", "lora0.safetensors"))
	base := DefaultOptions()
	base.Model, base.PromptEmbeds, base.NegativePromptEmbeds = dev, embeds, embeds
	base.NumFrames, base.Height, base.Width, base.Steps = 9, 64, 64, 6
	tests := []struct {
		name string
		edit func(o *Options)
		want string
	}{
		{"frames", func(o *Options) { o.NumFrames = 8 }, "--num-frames 8: the model's causal VAE takes 1 + 4k frames"},
		{"width", func(o *Options) { o.PromptEmbeds = narrow }, "narrow.safetensors: embeddings [1 5 16] are 16 wide, the model's text_dim is 32"},
		{"negative", func(o *Options) { o.NegativePromptEmbeds = "" }, "needs --negative-prompt-embeds"},
		{"expert", func(o *Options) { o.Model = noExpert }, "transformer_2 runs the low-noise steps"},
		{"no embeds", func(o *Options) { o.PromptEmbeds, o.NegativePromptEmbeds, o.Image = "", "", "x.png" }, "text-to-video model: --prompt TEXT (or --prompt-embeds FILE.safetensors) is required"},
		{"not embeddings", func(o *Options) {
			o.PromptEmbeds = filepath.Join(dev, "transformer", "diffusion_pytorch_model.safetensors")
		}, "want one tensor (or one named prompt_embeds)"},
		{"size", func(o *Options) { o.Height = 72 }, "multiples of 16"},
		{"prompt without encoder", func(o *Options) { o.Prompt, o.PromptEmbeds, o.NegativePromptEmbeds = "a fox", "", "" },
			"--prompt: wan: no text encoder: " + filepath.Join(dev, "text_encoder", "config.json") + " is missing"},
		{"prompt and embeds", func(o *Options) { o.Prompt = "a fox" }, "--prompt and --prompt-embeds both given"},
		{"negative prompt and embeds", func(o *Options) { o.NegativePrompt = "blurry" }, "--negative-prompt and --negative-prompt-embeds both given"},
		{"scheduler", func(o *Options) { o.Scheduler = "euler-a" }, `--scheduler "euler-a": --model ` + dev + ` offers unipc, euler, dpm++2m, lcm`},
		{"flow shift", func(o *Options) { o.FlowShift = -2 }, "--flow-shift -2: the shift must be a positive number (the folder's is 3)"},
		{"lora of another model", func(o *Options) { o.LoRA = []lora.Spec{{Path: svdLoRA, Strength: 1}} },
			"--lora: " + svdLoRA + ": key lora_unet_down_blocks_0_attentions_0_temporal_transformer_blocks_0_attn1_to_v.lora_down.weight names no layer of the Wan transformer (2 blocks, dim 40): a LoRA for another model?"},
		{"lora missing", func(o *Options) { o.LoRA2 = []lora.Spec{{Path: filepath.Join(tmp, "none.safetensors"), Strength: 1}} }, "none.safetensors: no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.edit(&o)
			_, err := Resolve(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err %v, want one line containing %q", err, tc.want)
			}
		})
	}
	o, err := Resolve(base)
	if err != nil {
		t.Fatal(err)
	}
	if o.GuidanceScale != 5 {
		t.Errorf("default guidance scale %v, want WanPipeline's 5", o.GuidanceScale)
	}
	if o.Scheduler != "unipc" || o.FlowShift != 3 {
		t.Errorf("scheduler %q, flow shift %v: want the folder's unipc and 3", o.Scheduler, o.FlowShift)
	}
}

// A prompt resolves on a folder with a text encoder, guided, without a negative prompt
// (WanPipeline's default is "").
func TestResolveWanPrompt(t *testing.T) {
	o := DefaultOptions()
	o.Model, o.Prompt = wantest.PromptFolder(t), "a fox"
	o.NumFrames, o.Height, o.Width, o.Steps = 5, 32, 32, 2
	r, err := Resolve(o)
	if err != nil {
		t.Fatal(err)
	}
	if r.GuidanceScale != 5 {
		t.Errorf("guidance %v", r.GuidanceScale)
	}
}

// Size, frames and steps left unset on a Wan folder take WanPipeline's defaults
// (480x832, 81 frames, 50 steps), and on a CPU backend that is one warning line naming
// the unset flags.
func TestResolveWanDefaultsWarnOnCPU(t *testing.T) {
	dev := shared.Require(t, "golden", "wan-dev")
	given := DefaultOptions()
	given.Model = dev
	given.PromptEmbeds = filepath.Join(dev, "cases", "full_pipeline_moe", "inputs.safetensors")
	given.NegativePromptEmbeds = given.PromptEmbeds
	o, err := Resolve(given)
	if err != nil {
		t.Fatal(err)
	}
	if o.Height != 480 || o.Width != 832 || o.NumFrames != 81 || o.Steps != 50 {
		t.Fatalf("defaults %dx%d, %d frames, %d steps; want WanPipeline's 480x832, 81, 50", o.Height, o.Width, o.NumFrames, o.Steps)
	}
	onCPU := func(string) bool { return true }
	w := CPUDefaultsWarning(given, o, onCPU)
	want := "vdpp generate: warning: --height --width --num-frames --steps unset, so the model's defaults run: 480x832, 81 frames, 50 steps, on the CPU"
	if !strings.HasPrefix(w, want) || strings.Contains(w, "\n") {
		t.Errorf("warning %q, want one line starting %q", w, want)
	}
	if w := CPUDefaultsWarning(given, o, func(string) bool { return false }); w != "" {
		t.Errorf("warning on a GPU backend: %q", w)
	}
	small := given
	small.Height, small.Width, small.NumFrames, small.Steps = 32, 32, 5, 2
	so, err := Resolve(small)
	if err != nil {
		t.Fatal(err)
	}
	if w := CPUDefaultsWarning(small, so, onCPU); w != "" {
		t.Errorf("warning with every size flag given: %q", w)
	}
}

// Defaults come from the model's family (Wan writes 16 fps, as diffusers' export_to_video
// in Wan's examples; SVD 7), and a flag of another family is refused, naming its family.
func TestResolveFamilyDefaultsAndForeignFlags(t *testing.T) {
	dev := shared.Require(t, "golden", "wan-dev")
	embeds := filepath.Join(dev, "cases", "full_pipeline_moe", "inputs.safetensors")
	wan := DefaultOptions()
	wan.Model, wan.PromptEmbeds, wan.NegativePromptEmbeds = dev, embeds, embeds
	wan.NumFrames, wan.Height, wan.Width, wan.Steps = 9, 64, 64, 6
	got, err := Resolve(wan)
	if err != nil {
		t.Fatal(err)
	}
	if got.FPS != 16 || got.MotionBucketID != 0 || got.MaxGuidance != 0 || got.GuidanceScale != 5 {
		t.Fatalf("Wan defaults: fps %d, motion %d, max guidance %v, guidance scale %v; want 16, 0, 0, 5", got.FPS, got.MotionBucketID, got.MaxGuidance, got.GuidanceScale)
	}
	svd := DefaultOptions()
	svd.Model, svd.Image = "builtin", writePNG(t)
	if got, err := Resolve(svd); err != nil || got.FPS != 7 || got.MotionBucketID != 127 || got.NoiseAugStrength != 0.02 {
		t.Fatalf("SVD defaults: %+v, %v", got, err)
	}
	for _, tc := range []struct {
		o    Options
		edit func(o *Options)
		want string
	}{
		{wan, func(o *Options) { o.MotionBucketID = 5 }, "--motion-bucket-id applies to svd models; --model " + dev + " is in the wan family"},
		{wan, func(o *Options) { o.MaxGuidance = 3 }, "--max-guidance applies to dummy, svd or synthetic models"},
		{wan, func(o *Options) { o.VAETile = 32 }, "--vae-tile applies to svd models"},
		{svd, func(o *Options) { o.GuidanceScale = 9 }, "--guidance-scale applies to wan models; --model builtin is in the svd family, which does not read it"},
		{svd, func(o *Options) { o.GuidanceScale2 = 2 }, "--guidance-scale-2 applies to wan models"},
	} {
		o := tc.o
		tc.edit(&o)
		if _, err := Resolve(o); !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}
