package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/generate"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/wan"
	"github.com/vdpp/vdpp/model/wan/wantest"
	"github.com/vdpp/vdpp/safetensors"
)

// `vdpp generate --prompt` through the real binary on a tiny Wan folder with a text encoder
// (wan-dev + model/wan/testdata/prompts), as a 2-stage pipeline: only stage 0 holds the text
// encoder (report.json), loading it is logged with its progress, and the frames are
// bit-identical to a one-process run given the same prompts' embeddings as files.
func TestGenerateWanPrompt(t *testing.T) {
	t.Parallel()
	dir := wantest.PromptFolder(t)
	const prompt, negative = "A red fox runs through the snow at dawn", "blurry"
	common := []string{"--model", dir, "--num-frames", "5", "--height", "32", "--width", "32", "--steps", "2", "--seed", "3"}

	out := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command(vdpp(t), append([]string{"generate", "--out", out, "--nproc", "2", "--prompt", prompt, "--negative-prompt", negative}, common...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("vdpp generate --prompt: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "component=text_encoder percent=100") {
		t.Errorf("no text encoder load progress on stderr:\n%s", stderr.String())
	}
	var rep generate.SampleReport
	data, err := os.ReadFile(filepath.Join(out, "sample-000", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Prompt != prompt || rep.NegativePrompt != negative || len(rep.Stages) != 2 {
		t.Fatalf("report: prompt %q negative %q, %d stages", rep.Prompt, rep.NegativePrompt, len(rep.Stages))
	}
	if rep.Stages[0].Components[wan.TextEncoder] <= 0 || rep.Stages[1].Components[wan.TextEncoder] != 0 {
		t.Fatalf("text encoder bytes per stage: %v, %v (want stage 0 only)", rep.Stages[0].Components, rep.Stages[1].Components)
	}

	// The same embeddings as files, one process.
	s, err := wan.Load(dir, family.Options{Roles: family.Roles{Condition: true}, Prompts: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	files := map[string]string{}
	for flag, text := range map[string]string{"--prompt-embeds": prompt, "--negative-prompt-embeds": negative} {
		e, err := s.Text.Embeds(text)
		if err != nil {
			t.Fatal(err)
		}
		files[flag] = filepath.Join(t.TempDir(), "embeds.safetensors")
		if err := safetensors.WriteFile(files[flag], []safetensors.NamedTensor{{Name: "embeds", Tensor: e}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	ref := runGenerateBin(t, append([]string{"--prompt-embeds", files["--prompt-embeds"], "--negative-prompt-embeds", files["--negative-prompt-embeds"]}, common...)...)
	frames, _ := filepath.Glob(filepath.Join(ref, "sample-000", "frames", "*.png"))
	if len(frames) != 5 {
		t.Fatalf("%d frames", len(frames))
	}
	for _, f := range frames {
		if !bytes.Equal(framePixels(t, f), framePixels(t, filepath.Join(out, "sample-000", "frames", filepath.Base(f)))) {
			t.Fatalf("frame %s: --prompt differs from --prompt-embeds of the same text", filepath.Base(f))
		}
	}
}

// --prompt on a folder without a text encoder, and --prompt with --prompt-embeds, are one
// line each.
func TestGenerateWanPromptErrors(t *testing.T) {
	t.Parallel()
	dir := wantest.PromptFolder(t)
	noTok := filepath.Join(t.TempDir(), "no-tokenizer")
	if err := os.Mkdir(noTok, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range []string{"model_index.json", "transformer", "transformer_2", "vae", "scheduler", "text_encoder"} {
		target, _ := os.Readlink(filepath.Join(dir, e))
		if target == "" {
			target = filepath.Join(dir, e)
		}
		if err := os.Symlink(target, filepath.Join(noTok, e)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", noTok, "--prompt", "a fox"}, filepath.Join(noTok, "tokenizer") + " has no spiece.model or tokenizer.json"},
		{[]string{"--model", dir, "--prompt", "a fox", "--prompt-embeds", "x.safetensors"}, "--prompt and --prompt-embeds both given"},
	} {
		cmd := exec.Command(vdpp(t), append([]string{"generate", "--out", t.TempDir(), "--num-frames", "5", "--height", "32", "--width", "32", "--steps", "2"}, c.args...)...)
		out, err := cmd.CombinedOutput()
		msg := strings.TrimSpace(string(out))
		if err == nil || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.want) {
			t.Errorf("%v: want one line containing %q, got (%v):\n%s", c.args, c.want, err, msg)
		}
	}
}

// `vdpp generate --model builtin-wan --prompt TEXT` from nothing but the binary: the
// built-in Wan's own defaults (17 frames at 160x96, 20 steps, guidance 5, from its
// vdpp_sampling.json) and every frame written, with the prompt in report.json.
func TestGenerateBuiltinWan(t *testing.T) {
	t.Parallel()
	const prompt = "A red fox runs through the snow at dawn"
	out := runGeneratePlain(t, "--model", "builtin-wan", "--prompt", prompt)
	var rep generate.SampleReport
	data, err := os.ReadFile(filepath.Join(out, "sample-000", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Prompt != prompt || rep.Frames != 17 || rep.Height != 96 || rep.Width != 160 || rep.Steps != 20 || rep.GuidanceScale != 5 {
		t.Fatalf("report: %q, %d frames %dx%d, %d steps, guidance %v; want the built-in Wan's defaults", rep.Prompt, rep.Frames, rep.Width, rep.Height, rep.Steps, rep.GuidanceScale)
	}
	if frames, _ := filepath.Glob(filepath.Join(out, "sample-000", "frames", "*.png")); len(frames) != 17 {
		t.Fatalf("%d frames, want 17", len(frames))
	}
}
