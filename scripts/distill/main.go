// Command distill writes what the distilled recipe (docs/lora.md) runs on without a
// download: a random Wan text-to-video folder of the given shape, a random step- and
// CFG-distillation LoRA of the lightx2v releases' key set and rank for it
// (wantest.DistillLoRAShapes), and random prompt embeddings of the text encoder's width:
//
//	go run ./scripts/distill -shape 1.3b -rank 64 -out /tmp/wan13b
//	go run ./cmd/vdpp generate --model /tmp/wan13b --prompt-embeds /tmp/wan13b/embeds.safetensors \
//	    --lora /tmp/wan13b/lightx2v_lora.safetensors:1.0 --steps 4 --scheduler lcm --flow-shift 5 --guidance-scale 1 \
//	    --num-frames 5 --height 64 --width 64
//
// The 1.3B shape is Wan2.1-T2V-1.3B's transformer (wantest.Wan13B; its weights are written in
// BF16, 2.8 GB, and take 5.7 GB as float32 once loaded) with a small VAE; "tiny" is a
// 2-block transformer of the same layout.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/model/wan/wantest"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

func main() {
	out := flag.String("out", "", "folder to write (the model folder, the LoRA and the embeddings)")
	shape := flag.String("shape", "tiny", "transformer shape: tiny or 1.3b")
	rank := flag.Int("rank", 64, "the LoRA's rank")
	tokens := flag.Int("tokens", 16, "prompt embedding rows")
	flag.Parse()
	if err := run(*out, *shape, *rank, *tokens); err != nil {
		fmt.Fprintln(os.Stderr, "distill:", err)
		os.Exit(1)
	}
}

func run(out, shape string, rank, tokens int) error {
	if out == "" {
		return fmt.Errorf("-out is required")
	}
	spec := wantest.Wan13B
	switch shape {
	case "1.3b":
	case "tiny":
		spec.Heads, spec.HeadDim, spec.Layers, spec.FFN, spec.TextDim, spec.FreqDim = 2, 16, 2, 64, 32, 32
	default:
		return fmt.Errorf("-shape %q: tiny or 1.3b", shape)
	}
	spec.Seed = 1
	if err := wantest.WriteT2VFolder(out, spec); err != nil {
		return err
	}
	cfg, err := transformer.ReadConfig(filepath.Join(out, "transformer"))
	if err != nil {
		return err
	}
	if err := wantest.WriteDistillLoRA(filepath.Join(out, "lightx2v_lora.safetensors"), cfg, rank, 2); err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(3, 4))
	emb := tensor.New(1, tokens, cfg.TextDim)
	for i := range emb.Data {
		emb.Data[i] = 0.1 * float32(r.NormFloat64())
	}
	if err := safetensors.WriteFile(filepath.Join(out, "embeds.safetensors"), []safetensors.NamedTensor{{Name: "prompt_embeds", Tensor: emb}}, nil); err != nil {
		return err
	}
	fmt.Println(out)
	return nil
}
